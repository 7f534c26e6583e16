package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/store"
)

// send posts body to path with token, with the headers given as name,
// value pairs, and answers the status and the body.
func send(t *testing.T, h *harness, token, path, body string, header ...string) (int, []byte) {
	t.Helper()
	code, b, _ := sendFull(t, h, token, path, body, header...)
	return code, b
}

// sendFull is send that also answers the response's headers.
func sendFull(t *testing.T, h *harness, token, path, body string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", h.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k := 0; k+1 < len(header); k += 2 {
		req.Header.Set(header[k], header[k+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// post sends body to path with token and answers the status and error.
func post(t *testing.T, h *harness, token, path, body string) (int, string) {
	t.Helper()
	code, b := send(t, h, token, path, body)
	var e api.Error
	_ = json.Unmarshal(b, &e)
	return code, e.Error
}

// TestAPIBodiesStrict: a body with a field the API does not know, or data
// after its JSON value, is refused and nothing is stored; a configuration
// is read by the YAML path's rules, naming the field; the server's own
// script limit applies.
func TestAPIBodiesStrict(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.MaxScriptBytes = 1000 })
	tests := map[string]struct {
		body, want string
	}{
		"unknown submit field":      {`{"spec":{"commands":["true"]},"hodl":true}`, `unknown field "hodl"`},
		"data after the body":       {`{"spec":{"commands":["true"]}} {"spec":{}}`, "unexpected data after the JSON value"},
		"unknown field in spec":     {`{"spec":{"commands":["true"],"resorces":{}}}`, "resorces: unknown field"},
		"spec of the wrong type":    {`{"spec":{"commands":"true"}}`, "commands"},
		"no spec":                   {`{"hold":true}`, "is missing"},
		"over the server's limit":   {`{"spec":{"commands":["` + strings.Repeat("x", 2000) + `"]}}`, "at most 1000"},
		"named source in the error": {`{"spec":{"commands":["true"],"bad":1},"source":"train.berth.yml"}`, "train.berth.yml"},
		"more nodes than allowed":   {`{"spec":{"commands":["true"],"nodes":3000000}}`, "3000000 nodes asked for, the most a run may have is 10000"},
		"groups over the bound":     {`{"spec":{"commands":["true"],"groups":[{"nodes":6000},{"nodes":6000}]}}`, "12000 nodes asked for"},
	}
	for name, tc := range tests {
		code, msg := post(t, h, testToken, "/api/v1/runs", tc.body)
		if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", name, code, msg, tc.want)
		}
	}
	if code, msg := post(t, h, testToken, "/api/v1/runs/1/control", `{"action":"hold","extra":1}`); code != http.StatusBadRequest || !strings.Contains(msg, "extra") {
		t.Errorf("control with an unknown field: %d %q, want 400", code, msg)
	}
	runs, err := h.st.ListRuns(context.Background(), store.RunFilter{All: true})
	if err != nil || len(runs) != 0 {
		t.Errorf("refused bodies stored %d runs (%v)", len(runs), err)
	}
	if code, msg := post(t, h, testToken, "/api/v1/runs", `{"spec":{"commands":["true"]}}`); code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("a plain submission: %d %q", code, msg)
	}
	st, err := h.c.Status(context.Background())
	if err != nil || st.MaxScriptBytes != 1000 {
		t.Errorf("status max_script_bytes %d (%v), want 1000", st.MaxScriptBytes, err)
	}
}

// TestNegativeNiceIsAnAdmins: only an administrator may give a run a
// negative nice, at submission or by an update, and nice is bounded.
func TestNegativeNiceIsAnAdmins(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	bob := h.userClient(t, "bob")
	var apiErr *client.APIError
	if _, err := bob.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nnice: -5\n"), Hold: true}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Errorf("bob's nice -5: %v, want 403", err)
	}
	r, err := bob.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nnice: 5\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	neg, huge := int64(-1), int64(-1<<62)
	if _, err := bob.Control(ctx, r.Name, api.ControlRequest{Action: "update", Nice: &neg}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Errorf("bob's update to nice -1: %v, want 403", err)
	}
	if _, err := h.c.Control(ctx, r.Name, api.ControlRequest{Action: "update", Nice: &huge}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
		t.Errorf("an update to nice -2^62: %v, want 400", err)
	}
	if _, err := h.c.Control(ctx, r.Name, api.ControlRequest{Action: "update", Nice: &neg}); err != nil {
		t.Errorf("the admin's update to nice -1: %v", err)
	}
	if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nnice: -5\n"), Hold: true}); err != nil {
		t.Errorf("the admin's nice -5: %v", err)
	}
}

// TestDeletedTokenStopsWorking: a token deleted from the store is refused
// once its cache entry expires, without a restart.
func TestDeletedTokenStopsWorking(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	h.srv.tokenTTL.Store(0)
	ctx := context.Background()
	bob := h.userClient(t, "bob")
	if _, err := bob.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	execRaw(t, dir, `DELETE FROM tokens WHERE hash = ?`, HashToken("bob-token"))
	var apiErr *client.APIError
	if _, err := bob.Nodes(ctx); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Errorf("a deleted token: %v, want 401", err)
	}
}

// TestIDsNeverReissued: when the transactions after a submission are lost
// (a torn WAL tail after a power loss, made here by deleting the rows),
// the next submission after a restart gets a new ID, never the lost run's,
// which its client may hold.
func TestIDsNeverReissued(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	ctx := context.Background()
	var last *api.Run
	for range 3 {
		r, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	last, err := h.c.Run(ctx, strconv.FormatInt(last.ID, 10))
	if err != nil {
		t.Fatal(err)
	}
	addr := h.http.Listener.Addr().String()
	h.close()
	for _, q := range []string{`DELETE FROM events WHERE run_id = ?`, `DELETE FROM jobs WHERE run_id = ?`, `DELETE FROM runs WHERE id = ?`} {
		execRaw(t, dir, q, last.ID)
	}
	h = newHarnessAt(t, dir, addr)
	r, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID <= last.ID {
		t.Errorf("after the lost run %d, a new run got ID %d", last.ID, r.ID)
	}
	// A run that waits has its jobs in the cluster (their rows are written
	// at placement): the API shows them.
	got, err := h.c.Run(ctx, strconv.FormatInt(r.ID, 10))
	if err != nil || len(got.Jobs) != 1 {
		t.Fatalf("run %v (%v)", got, err)
	}
	jobs := got.Jobs
	lost := last.Jobs
	if len(lost) != 1 {
		t.Fatalf("the lost run had jobs %v", lost)
	}
	if jobs[0].ID <= lost[0].ID {
		t.Errorf("the new run's job got ID %d, not above the lost job %d", jobs[0].ID, lost[0].ID)
	}
}

// submitKeyed posts a submission with an Idempotency-Key as token's user.
func submitKeyed(t *testing.T, h *harness, token, key string) int64 {
	t.Helper()
	code, b := send(t, h, token, "/api/v1/runs", `{"spec":{"commands":["true"]},"hold":true}`, "Idempotency-Key", key)
	var r api.Run
	if err := json.Unmarshal(b, &r); err != nil || code != http.StatusCreated {
		t.Errorf("submission with key %q: %d %s", key, code, b)
	}
	return r.ID
}

// TestIdempotencyKey: submissions with one key make one run, however many
// arrive and however they interleave, before and after a restart; another
// user's key is another key.
func TestIdempotencyKey(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir)
	ctx := context.Background()
	ids := make(chan int64, 8)
	for range 8 {
		go func() { ids <- submitKeyed(t, h, testToken, "k1") }()
	}
	first := <-ids
	for range 7 {
		if id := <-ids; id != first {
			t.Errorf("key k1 made runs %d and %d", first, id)
		}
	}
	h.userClient(t, "bob")
	if bobs := submitKeyed(t, h, "bob-token", "k1"); bobs == first {
		t.Errorf("bob's k1 answered the admin's run %d", first)
	}
	other := submitKeyed(t, h, testToken, "k2")
	addr := h.http.Listener.Addr().String()
	h.close()
	h = newHarnessAt(t, dir, addr)
	if again := submitKeyed(t, h, testToken, "k1"); again != first {
		t.Errorf("after a restart k1 answered %d, want %d", again, first)
	}
	if again := submitKeyed(t, h, testToken, "k2"); again != other {
		t.Errorf("after a restart k2 answered %d, want %d", again, other)
	}
	runs, err := h.st.ListRuns(ctx, store.RunFilter{All: true})
	if err != nil || len(runs) != 3 {
		t.Errorf("%d runs stored (%v), want 3: k1, bob's k1, k2", len(runs), err)
	}
}

// TestSubmitRetriesLostAnswers: when the connection fails after the
// server made the run, the client sends the submission again with its key
// and gets the same run; one run is stored.
func TestSubmitRetriesLostAnswers(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	var answered atomic.Int32
	// A proxy that forwards each request and, the first time, drops the
	// connection instead of passing the answer on.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(r.Method, h.http.URL+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		if answered.Add(1) == 1 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	c := client.New(proxy.URL, testToken)
	r, err := c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := h.st.ListRuns(ctx, store.RunFilter{All: true})
	if err != nil || len(runs) != 1 || runs[0].ID != r.ID || answered.Load() != 2 {
		t.Errorf("%d runs stored (%v), answer %d after %d tries; want one, the answer's, after 2", len(runs), err, r.ID, answered.Load())
	}
}

// gatedReader gives r's bytes once gate is closed.
type gatedReader struct {
	gate <-chan struct{}
	r    io.Reader
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.gate
	return g.r.Read(p)
}

// The server answers everyone else while one client sends the largest
// submission it allows (a script near the 4 MB limit), however slowly:
// half the body is sent, then twenty other submissions and a listing are
// answered, and only then is the rest sent and the large one answered.
// A server that read or checked bodies under its state's lock would hang
// here.
func TestOthersAnsweredDuringALargeSubmission(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	script := "#!/bin/bash\n" + strings.Repeat("# padding padding padding\n", (4<<20-4096)/26) + "true\n"
	b, err := json.Marshal(map[string]any{"spec": map[string]any{"commands": []string{script}}, "hold": true})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	half := len(b) / 2
	req, err := http.NewRequest("POST", h.http.URL+"/api/v1/runs", io.MultiReader(bytes.NewReader(b[:half]), gatedReader{gate, bytes.NewReader(b[half:])}))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	big := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			big <- 0
			return
		}
		resp.Body.Close()
		big <- resp.StatusCode
	}()
	for i := range 20 {
		if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, fmt.Sprintf("type: task\nname: small-%d\ncommands: [\"true\"]\n", i)), Hold: true}); err != nil {
			t.Fatalf("a small submission while the large one is sent: %v", err)
		}
	}
	if runs, err := h.c.Runs(ctx, client.ListOptions{}); err != nil || len(runs) != 20 {
		t.Fatalf("the listing while the large one is sent: %d runs, %v", len(runs), err)
	}
	select {
	case code := <-big:
		t.Fatalf("the large submission was answered (%d) before its body was all sent", code)
	default:
	}
	close(gate)
	if code := <-big; code != http.StatusCreated {
		t.Errorf("the large submission: %d", code)
	}
}
