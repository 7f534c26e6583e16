package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// lean=1 lists each configuration without its commands, environment and
// files, and with what the Slurm listings read (tags, fleets, limits).
func TestListRunsLean(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	r := submit(t, h, "type: task\nname: lean\nmax_duration: 90s\ntags: {slurm.job_name: lean}\nenv: {BIG: \"x\"}\ncommands: [\"sleep 0\"]\n")
	for _, lean := range []bool{false, true} {
		runs, err := h.c.Runs(ctx, client.ListOptions{All: true, Spec: true, Lean: lean, IDs: []int64{r.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || runs[0].Spec == nil {
			t.Fatalf("lean=%v: listed %+v, want run %d with its configuration", lean, runs, r.ID)
		}
		s := runs[0].Spec
		if got := len(s.Commands) > 0 && len(s.Env) > 0; got == lean {
			t.Errorf("lean=%v: commands %q env %v", lean, s.Commands, s.Env)
		}
		if s.Tags["slurm.job_name"] != "lean" || s.MaxDuration == nil {
			t.Errorf("lean=%v: the configuration lost what the Slurm listings show: tags %v, max_duration %v", lean, s.Tags, s.MaxDuration)
		}
	}
}

// writeSpy is a ResponseWriter that records the size of each write.
type writeSpy struct {
	http.ResponseWriter
	sizes []int
}

func (w *writeSpy) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.ResponseWriter.Write(p)
}

// A listing is written a run at a time, from pages of the store: no write
// holds more than one run, whatever the listing's length.
func TestListRunsWritesEachRun(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.ListPage = 3 })
	ctx := context.Background()
	const n = 12
	for range n {
		if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"sleep 0\"]\n"), Hold: true}); err != nil {
			t.Fatal(err)
		}
	}
	spy := &writeSpy{}
	handler := h.srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spy.ResponseWriter = w
		handler.ServeHTTP(spy, r)
	}))
	t.Cleanup(hs.Close)
	runs, err := client.New(hs.URL, testToken).Runs(ctx, client.ListOptions{All: true, Jobs: true, Spec: true, Lean: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Fatalf("listed %d runs, want %d", len(runs), n)
	}
	total, largest := 0, 0
	for _, s := range spy.sizes {
		total, largest = total+s, max(largest, s)
	}
	if len(spy.sizes) < n || largest*n > total*2 {
		t.Fatalf("the listing of %d runs (%d bytes) came in %d writes, the largest %d bytes: not one run at a time", n, total, len(spy.sizes), largest)
	}
}
