package server

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// GET /runs narrows the listing on the server: ids, user, status, the
// window and a limit, with each page's jobs read in one query; pages of two
// runs here, so that every listing spans pages.
func TestListRunsFilters(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.ListPage = 2 })
	ctx := context.Background()
	a := submit(t, h, "type: task\ncommands: [\"true\"]\n")
	b := submit(t, h, "type: task\nnodes: 2\ncommands: [\"true\"]\n")
	c := submit(t, h, "type: task\ncommands: [\"true\"]\n")
	list := func(o client.ListOptions) []int64 {
		t.Helper()
		o.Jobs, o.Spec = true, true
		runs, err := h.c.Runs(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range runs {
			ids = append(ids, r.ID)
			if r.ID == b.ID && len(r.Jobs) != 2 || r.Spec == nil {
				t.Errorf("run %d listed with %d jobs, spec %v", r.ID, len(r.Jobs), r.Spec != nil)
			}
		}
		return ids
	}
	tests := map[string]struct {
		o    client.ListOptions
		want []int64
	}{
		"every run":   {client.ListOptions{All: true}, []int64{c.ID, b.ID, a.ID}},
		"active":      {client.ListOptions{}, []int64{c.ID, b.ID, a.ID}},
		"limit 2":     {client.ListOptions{All: true, Limit: 2}, []int64{c.ID, b.ID}},
		"limit 1":     {client.ListOptions{All: true, Limit: 1}, []int64{c.ID}},
		"limit 5":     {client.ListOptions{All: true, Limit: 5}, []int64{c.ID, b.ID, a.ID}},
		"ids":         {client.ListOptions{All: true, IDs: []int64{a.ID, c.ID}}, []int64{c.ID, a.ID}},
		"user":        {client.ListOptions{All: true, Users: []string{"admin"}}, []int64{c.ID, b.ID, a.ID}},
		"other user":  {client.ListOptions{All: true, Users: []string{"nobody"}}, nil},
		"status":      {client.ListOptions{All: true, Statuses: []api.Status{api.StatusRunning}}, nil},
		"since":       {client.ListOptions{All: true, Since: time.Now().Add(time.Hour)}, []int64{c.ID, b.ID, a.ID}},
		"until":       {client.ListOptions{All: true, Until: a.SubmittedAt}, nil},
		"until after": {client.ListOptions{All: true, Until: c.SubmittedAt.Add(time.Nanosecond)}, []int64{c.ID, b.ID, a.ID}},
	}
	for name, tc := range tests {
		if got := list(tc.o); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", name, got, tc.want)
		}
	}
	for _, q := range []string{"ids=x", "since=yesterday"} {
		req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/api/v1/runs?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /runs?%s: %s, want 400", q, resp.Status)
		}
	}
}
