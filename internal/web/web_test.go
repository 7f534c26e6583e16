package web_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// browserless is an HTTP client that keeps cookies and does not follow
// redirects, so that each answer can be checked.
func browserless(t *testing.T) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, hc *http.Client, u, token string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "berth_token", Value: token})
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func post(t *testing.T, hc *http.Client, u, token string, form url.Values) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.AddCookie(&http.Cookie{Name: "berth_token", Value: token})
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestSignIn: every page asks for a token; a bad one is refused with the
// API's reason; a good one is kept in an HttpOnly, SameSite=Strict cookie;
// signing out forgets it.
func TestSignIn(t *testing.T) {
	c := newCluster(t)
	hc := browserless(t)

	code, h, _ := get(t, hc, c.url+"/", "")
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/runs" {
		t.Fatalf("GET / = %d %q, want a redirect to /ui/runs", code, h.Get("Location"))
	}
	for _, p := range []string{"/ui/runs", "/ui/runs/1", "/ui/fleets", "/ui/queue"} {
		code, h, _ := get(t, hc, c.url+p, "")
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/login?next=") {
			t.Errorf("GET %s signed out = %d %q, want the login page", p, code, h.Get("Location"))
		}
		if code, _, _ := get(t, hc, c.url+p, "not-a-token"); code != http.StatusSeeOther {
			t.Errorf("GET %s with a bad cookie = %d, want the login page", p, code)
		}
	}
	if code, _, _ := get(t, hc, c.url+"/ui/runs/events", ""); code != http.StatusUnauthorized {
		t.Errorf("live stream signed out = %d, want 401", code)
	}

	code, _, body := post(t, hc, c.url+"/ui/login", "", url.Values{"token": {"wrong"}})
	if code != http.StatusOK || !strings.Contains(body, "Sign-in refused") || !strings.Contains(body, "unknown token") {
		t.Fatalf("bad token: %d, body lacks the refusal:\n%s", code, body)
	}

	if _, h, _ := post(t, hc, c.url+"/ui/login", "", url.Values{"token": {"wrong"}}); len((&http.Response{Header: h}).Cookies()) != 0 {
		t.Fatal("a refused token was kept")
	}
	code, h, _ = post(t, hc, c.url+"/ui/login", "", url.Values{"token": {adminToken}, "next": {"/ui/fleets"}})
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/fleets" {
		t.Fatalf("good token: %d %q", code, h.Get("Location"))
	}
	ck := (&http.Response{Header: h}).Cookies()
	if len(ck) != 1 || ck[0].Value != adminToken || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/" {
		t.Fatalf("cookie = %+v, want the token, HttpOnly, SameSite=Strict, Path=/", ck)
	}
	// A redirect after sign-in stays on the dashboard.
	_, h, _ = post(t, hc, c.url+"/ui/login", "", url.Values{"token": {adminToken}, "next": {"//evil.example/"}})
	if h.Get("Location") != "/ui/runs" {
		t.Errorf("next=//evil.example/ redirected to %q", h.Get("Location"))
	}
	if code, _, body := get(t, hc, c.url+"/ui/runs", adminToken); code != http.StatusOK || !strings.Contains(body, "admin (admin)") {
		t.Fatalf("runs page signed in = %d", code)
	}
	_, h, _ = post(t, hc, c.url+"/ui/logout", adminToken, nil)
	ck = (&http.Response{Header: h}).Cookies()
	if len(ck) != 1 || ck[0].MaxAge >= 0 || ck[0].Value != "" {
		t.Fatalf("logout cookie = %+v, want it removed", ck)
	}
	// The API's routes are unchanged by the dashboard.
	if code, _, _ := get(t, hc, c.url+"/api/v1/nope", ""); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/nope = %d, want 404", code)
	}
}

// TestRights: the pages act with the signed-in user's rights, as the API
// gives them: a user who is not an administrator gets no drain button, and
// a drain posted anyway is refused with the API's reason; their own run
// they may stop.
func TestRights(t *testing.T) {
	c := newCluster(t)
	hc := browserless(t)
	bob := c.userToken(t, "bob")

	_, _, body := get(t, hc, c.url+"/ui/fleets", bob)
	if !strings.Contains(body, `id="node-node1"`) || strings.Contains(body, "drain-node1") {
		t.Fatalf("bob's fleets page: want node1 without a drain button:\n%s", body)
	}
	if _, _, admin := get(t, hc, c.url+"/ui/fleets", adminToken); !strings.Contains(admin, `id="drain-node1"`) {
		t.Fatal("the admin's fleets page has no drain button")
	}
	code, h, _ := post(t, hc, c.url+"/ui/nodes/node1/drain", bob, url.Values{"reason": {"x"}})
	loc, _ := url.Parse(h.Get("Location"))
	if code != http.StatusSeeOther || loc.Path != "/ui/fleets" || !strings.Contains(loc.Query().Get("err"), "admin's token") {
		t.Fatalf("bob's drain: %d %q, want back to fleets with the API's refusal", code, h.Get("Location"))
	}
	ns, _ := c.admin.Nodes(context.Background())
	if ns[0].Drain != nil {
		t.Fatal("bob drained node1")
	}
	if _, _, page := get(t, hc, c.url+h.Get("Location"), bob); !strings.Contains(page, `role="alert"`) {
		t.Error("the refusal is not shown on the fleets page")
	}
	// The admin's drain works, and resume.
	post(t, hc, c.url+"/ui/nodes/node1/drain", adminToken, url.Values{"reason": {"maintenance"}})
	ns, _ = c.admin.Nodes(context.Background())
	if ns[0].Drain == nil || ns[0].Drain.Reason != "maintenance" {
		t.Fatalf("after the admin's drain: %+v", ns[0].Drain)
	}
	post(t, hc, c.url+"/ui/nodes/node1/resume", adminToken, nil)
	ns, _ = c.admin.Nodes(context.Background())
	if ns[0].Drain != nil {
		t.Fatal("resume left node1 drained")
	}
}

// TestRunPages: a run's page, its log as text, its live log stream and
// the runs' live stream show what the API says of it; hold and release
// go through the API.
func TestRunPages(t *testing.T) {
	c := newCluster(t)
	hc := browserless(t)
	ctx := context.Background()
	r := c.submit(t, "type: task\nname: echo1\ncommands:\n  - echo 'line-one-<b>'\n")
	waitFor(t, "run done", func() bool { x, err := c.admin.Run(ctx, fmt.Sprint(r.ID)); return err == nil && x.Status == "done" })

	base := fmt.Sprintf("%s/ui/runs/%d", c.url, r.ID)
	code, _, page := get(t, hc, base, adminToken)
	for _, want := range []string{"echo1", `id="run-status">done`, "echo &#39;line-one-&lt;b&gt;&#39;", "<h2>Events</h2>", "CPU (% of the allocated CPUs)"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("run page (%d) lacks %q:\n%s", code, want, page)
		}
	}
	code, h, text := get(t, hc, base+"/log.txt", adminToken)
	if code != http.StatusOK || text != "line-one-<b>\n" || !strings.Contains(h.Get("Content-Disposition"), "attachment") {
		t.Errorf("log.txt = %d %q %q", code, text, h.Get("Content-Disposition"))
	}
	events := sse(t, c.url+fmt.Sprintf("/ui/runs/%d/log", r.ID), 2)
	if events[0] != "log:line-one-&lt;b&gt;\n" || events[1] != "end:run ended: done" {
		t.Errorf("log stream = %q", events)
	}
	rows := sse(t, c.url+"/ui/runs/events?all=1", 1)
	if !strings.HasPrefix(rows[0], "runs:") || !strings.Contains(rows[0], fmt.Sprintf(`id="run-%d" data-status="done"`, r.ID)) {
		t.Errorf("runs stream = %q", rows)
	}
	// Filters: a done run is not among the active ones, nor the failed.
	for q, want := range map[string]bool{"": false, "?all=1": true, "?status=done": true, "?status=failed": false, "?all=1&user=bob": false, "?all=1&fleet=gpu": false} {
		_, _, body := get(t, hc, c.url+"/ui/runs"+q, adminToken)
		if got := strings.Contains(body, fmt.Sprintf(`id="run-%d"`, r.ID)); got != want {
			t.Errorf("runs%s lists the run: %v, want %v", q, got, want)
		}
	}

	// A held run is released from its page.
	held, err := c.admin.Submit(ctx, apiHeld(t))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pass to see the hold", func() bool {
		x, err := c.admin.Run(ctx, fmt.Sprint(held.ID))
		return err == nil && x.Reason == "JobHeldUser"
	})
	hb := fmt.Sprintf("%s/ui/runs/%d", c.url, held.ID)
	if _, _, p := get(t, hc, hb, adminToken); !strings.Contains(p, `value="release"`) {
		t.Fatalf("a held run's page has no Release button:\n%s", p)
	}
	post(t, hc, hb+"/control", adminToken, url.Values{"action": {"release"}})
	waitFor(t, "released run done", func() bool {
		x, err := c.admin.Run(ctx, fmt.Sprint(held.ID))
		return err == nil && x.Status == "done"
	})
}

// sse reads n events of a stream as "event:data".
func sse(t *testing.T, u string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.AddCookie(&http.Cookie{Name: "berth_token", Value: adminToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("%s: Content-Type %q", u, ct)
	}
	next := sseReader(resp.Body)
	var out []string
	for len(out) < n {
		e, err := next()
		if err != nil {
			t.Fatalf("%s: %d events of %d: %v", u, len(out), n, err)
		}
		out = append(out, e)
	}
	return out
}

// sseReader reads server-sent events from r, each as "event:data"
// (comments skipped).
func sseReader(r io.Reader) func() (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	return func() (string, error) {
		var ev string
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "event: "):
				ev = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			case line == "" && (ev != "" || data != nil):
				return ev + ":" + strings.Join(data, "\n"), nil
			}
		}
		if err := sc.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
}

// TestLiveViewsFollowChanges: the runs list, a run's page and the fleets
// page are sent again when the cluster changes, not on a timer: the
// server's dashboard re-reads a view at a change (Options.Changed) and
// otherwise only every 15 s (every hour without the hook: the harness's
// DashboardPoll), so each event below, which follows a change within
// seconds, came from the change.
func TestLiveViewsFollowChanges(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	open := func(path string) func(want string) string {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, c.url+path, nil)
		req.AddCookie(&http.Cookie{Name: "berth_token", Value: adminToken})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		next := sseReader(resp.Body)
		// until reads events until one contains want, within 10 s (less
		// than the 15 s refresh).
		return func(want string) string {
			deadline := time.AfterFunc(10*time.Second, cancel)
			defer deadline.Stop()
			for {
				e, err := next()
				if err != nil {
					t.Fatalf("%s: no event with %q within 10 s: %v", path, want, err)
				}
				if strings.Contains(e, want) {
					return e
				}
			}
		}
	}
	runs := open("/ui/runs/events")
	runs("No runs.")
	r := c.submit(t, "type: task\nname: live1\ncommands:\n  - sleep 1\n")
	runs(fmt.Sprintf(`id="run-%d"`, r.ID))

	page := open(fmt.Sprintf("/ui/runs/%d/events", r.ID))
	page("status:")
	if e := page(`id="run-status">done`); !strings.HasPrefix(e, "status:") {
		t.Errorf("the run's end came as %q", e)
	}
	page("timeline:")

	fleets := open("/ui/fleets/events")
	fleets("node-node1:")
	if _, err := c.admin.Drain(ctx, "node1", "live-check"); err != nil {
		t.Fatal(err)
	}
	if e := fleets("live-check"); !strings.HasPrefix(e, "node-node1:") {
		t.Errorf("the drain came as %q", e)
	}
}

// TestCompressed: pages and assets go gzipped to a client that takes it
// (and plain to one that does not); live streams never.
func TestCompressed(t *testing.T) {
	c := newCluster(t)
	tr := &http.Transport{DisableCompression: true} // see the bytes as sent
	hc := &http.Client{Transport: tr}
	fetch := func(path, enc string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, c.url+path, nil)
		req.AddCookie(&http.Cookie{Name: "berth_token", Value: adminToken})
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, path := range []string{"/ui/runs", "/ui/static/htmx.min.js"} {
		plainResp, plain := fetch(path, "")
		gzResp, packed := fetch(path, "gzip")
		if plainResp.Header.Get("Content-Encoding") != "" || gzResp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: Content-Encoding %q without gzip, %q with", path, plainResp.Header.Get("Content-Encoding"), gzResp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(packed))
		if err != nil {
			t.Fatal(err)
		}
		unpacked, _ := io.ReadAll(zr)
		if path != "/ui/runs" && !bytes.Equal(unpacked, plain) { // the page has its clock
			t.Errorf("%s: gzipped body differs", path)
		}
		if len(packed)*2 > len(plain) {
			t.Errorf("%s: %d bytes gzipped of %d", path, len(packed), len(plain))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/ui/runs/events", nil)
	req.AddCookie(&http.Cookie{Name: "berth_token", Value: adminToken})
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ce := resp.Header.Get("Content-Encoding"); ce != "" {
		t.Errorf("the live stream is sent with Content-Encoding %q", ce)
	}
	if e, err := sseReader(resp.Body)(); err != nil || !strings.HasPrefix(e, "runs:") {
		t.Errorf("the live stream's first event: %q, %v", e, err)
	}
}
