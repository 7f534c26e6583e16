package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// fuzzClient gives up on an answer that takes more than 10 s.
var fuzzClient = &http.Client{Timeout: 10 * time.Second}

// FuzzAPIBodies posts arbitrary bodies to every route that takes one, as
// an administrator: the server answers each with success or a client
// error, never a server error, and stays up for the next. Under `go test`
// the seeds run; `go test -fuzz FuzzAPIBodies ./internal/server` explores.
func FuzzAPIBodies(f *testing.F) {
	h := newHarness(f, f.TempDir())
	if _, err := h.c.Submit(context.Background(), api.SubmitRequest{Spec: task(f, "type: task\ncommands: [\"true\"]\n"), Hold: true}); err != nil {
		f.Fatal(err)
	}
	routes := []string{"/api/v1/runs", "/api/v1/plan", "/api/v1/runs/1/control", "/api/v1/runs/1/signal", "/api/v1/runs/1/stop",
		"/api/v1/agent/register", "/api/v1/agent/events", "/api/v1/agent/health", "/api/v1/agent/metrics",
		"/api/v1/nodes/n1/drain", "/api/v1/runs/1/steps", "/api/v1/policy/reload"}
	for i, body := range []string{
		`{"spec":{"commands":["true"]},"hold":true}`,
		`{"spec":{"commands":["true"],"resources":{"cpu":{"count":{"min":0}}}}}`,
		`{"hold":true}`,
		`{"signal":15}`,
		`{"abort":true}`,
		`{"name":"n1","cpus":2,"memory":1073741824}`,
		`{"node":"n1","events":[{"job_id":1,"type":"log","offset":0,"size":-5,"data":"eA=="}]}`,
		`{"status":"failure","reason":"x"}`,
		`{"node":"n1","samples":[{"job_id":1,"cpu":-1}]}`,
		`{"reason":"` + "\x00" + `"}`,
		`{"commands":["true"],"nodes":-1}`,
		`[]`, `null`, `{"spec":null}`, `{"spec":{"commands":["true"]}} trailing`,
	} {
		f.Add(uint8(i), body)
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		path := routes[int(route)%len(routes)]
		req, err := http.NewRequest("POST", h.http.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := fuzzClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s %q: %v", path, body, err) // a hang is a failure too
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("POST %s %q: %d %s", path, body, resp.StatusCode, b)
		}
	})
}
