package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/client"
)

// postMultipart posts a form with a file, as a browser's upload.
func postMultipart(t *testing.T, hc *http.Client, u, token string, fields map[string]string, file, content string) (int, http.Header, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", file)
	io.WriteString(fw, content)
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, u, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.AddCookie(&http.Cookie{Name: "berth_token", Value: token})
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// TestSubmitSearchUsage: the submit page shows a configuration's problems
// at their file:line:field and submits nothing, shows a good one's plan
// and submits nothing, and submits an uploaded one, going to the run's
// page; the run's log is searched (plain and regexp, marked, escaped);
// the usage page shows its use and the fairshare tree.
func TestSubmitSearchUsage(t *testing.T) {
	c := newCluster(t)
	hc := browserless(t)
	ctx := context.Background()
	count := func() int {
		rs, err := c.admin.Runs(ctx, client.ListOptions{All: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}

	code, _, page := get(t, hc, c.url+"/ui/submit", adminToken)
	if code != http.StatusOK || !strings.Contains(page, `<select id="project" name="project">`) || !strings.Contains(page, `aria-current="page">Submit`) {
		t.Fatalf("submit page = %d:\n%s", code, page)
	}

	bad := "type: task\nname: bad1\nresources:\n  memory: lots\ncommands:\n  - echo hi\n"
	code, _, page = post(t, hc, c.url+"/ui/submit", adminToken, url.Values{"config": {bad}, "source": {"train.yml"}, "action": {"submit"}})
	if code != http.StatusOK || !strings.Contains(page, `id="problems"`) || !strings.Contains(page, "train.yml:4:") || !strings.Contains(page, "resources.memory") {
		t.Errorf("a bad configuration = %d, want its problem at train.yml:4 resources.memory:\n%s", code, page)
	}
	if n := count(); n != 0 {
		t.Errorf("%d runs after a refused configuration, want 0", n)
	}
	code, _, page = post(t, hc, c.url+"/ui/submit", adminToken, url.Values{"config": {"type: fleet\nname: f\n"}, "action": {"plan"}})
	if code != http.StatusOK || !strings.Contains(page, "berth apply -f FILE") {
		t.Errorf("a fleet = %d, want it sent to berth apply:\n%s", code, page)
	}

	good := "type: task\nname: logs1\ncommands:\n  - echo alpha 1\n  - echo 'beta <2>'\n  - echo alpha 3 alpha\n"
	code, _, page = post(t, hc, c.url+"/ui/submit", adminToken, url.Values{"config": {good}, "action": {"plan"}})
	for _, want := range []string{`id="plan"`, "<td>node1</td>", "<td>now</td>", `id="submit-btn"`, "logs1"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("plan (%d) lacks %q:\n%s", code, want, page)
		}
	}
	if n := count(); n != 0 {
		t.Errorf("%d runs after a plan, want 0", n)
	}

	// The upload wins over the text field.
	code, h, page := postMultipart(t, hc, c.url+"/ui/submit", adminToken, map[string]string{"config": bad, "action": "submit"}, "logs.yml", good)
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/runs/") {
		t.Fatalf("submit = %d %q, want the run's page:\n%s", code, h.Get("Location"), page)
	}
	ref := strings.TrimPrefix(h.Get("Location"), "/ui/runs/")
	waitFor(t, "run done", func() bool { x, err := c.admin.Run(ctx, ref); return err == nil && x.Status == "done" })
	if n := count(); n != 1 {
		t.Errorf("%d runs after one submit, want 1", n)
	}

	search := func(q string, re bool, htmx bool) (int, string) {
		v := url.Values{"q": {q}}
		if re {
			v.Set("re", "1")
		}
		req, _ := http.NewRequest(http.MethodGet, c.url+"/ui/runs/"+ref+"/search?"+v.Encode(), nil)
		req.AddCookie(&http.Cookie{Name: "berth_token", Value: adminToken})
		if htmx {
			req.Header.Set("HX-Request", "true")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, frag := search("alpha", false, true)
	for _, want := range []string{"2 matching lines", `<span class="lno">1:</span> <mark>alpha</mark> 1`, `<span class="lno">3:</span> <mark>alpha</mark> 3 <mark>alpha</mark>`} {
		if code != http.StatusOK || !strings.Contains(frag, want) {
			t.Errorf("search alpha (%d) lacks %q:\n%s", code, want, frag)
		}
	}
	if strings.Contains(frag, "<html") || strings.Contains(frag, "beta") {
		t.Errorf("search alpha: want the matching lines alone:\n%s", frag)
	}
	code, frag = search(`b.ta <\d>`, true, true)
	if code != http.StatusOK || !strings.Contains(frag, `<span class="lno">2:</span> <mark>beta &lt;2&gt;</mark>`) || !strings.Contains(frag, "1 matching line ") {
		t.Errorf("regexp search (%d):\n%s", code, frag)
	}
	if _, frag = search(`b.ta <\d>`, false, true); !strings.Contains(frag, "0 matching lines") {
		t.Errorf("the same as a plain string must match nothing:\n%s", frag)
	}
	if _, frag = search("(", true, true); !strings.Contains(frag, "not a regular expression") {
		t.Errorf("a bad regexp:\n%s", frag)
	}
	// Without htmx: the run's page, its live log kept, with the results.
	code, page = search("alpha", false, false)
	for _, want := range []string{"<!doctype html>", `sse-connect="/ui/runs/` + ref + `/log"`, `value="alpha"`, "<mark>alpha</mark>"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("search page (%d) lacks %q", code, want)
		}
	}
	run, err := c.admin.Run(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?window=day", "?window=month&project=" + url.QueryEscape(run.Project)} {
		code, _, page = get(t, hc, c.url+"/ui/usage"+q, adminToken)
		for _, want := range []string{fmt.Sprintf("<td>%s</td><td>(all)</td><td>1</td><td>1</td>", run.Project), "<td>admin</td>", `<svg viewBox`, `id="fairshare"`, "<td>root</td>"} {
			if code != http.StatusOK || !strings.Contains(page, want) {
				t.Errorf("usage%s (%d) lacks %q:\n%s", q, code, want, page)
			}
		}
	}
	// Bob, in another project, sees none of the admin's use (the
	// fairshare tree is everyone's).
	bob := c.userToken(t, "bob")
	if _, err := c.admin.CreateProject(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.SetMember(ctx, "lab", "bob", "user"); err != nil {
		t.Fatal(err)
	}
	if err := c.admin.RemoveMember(ctx, run.Project, "bob"); err != nil {
		t.Logf("bob was not in %s: %v", run.Project, err)
	}
	code, _, page = get(t, hc, c.url+"/ui/usage", bob)
	table, _, _ := strings.Cut(page[strings.Index(page, `id="usage"`):], "</table>")
	if code != http.StatusOK || strings.Contains(table, "<td>admin</td>") || !strings.Contains(table, "Nothing ran") {
		t.Errorf("bob's usage page (%d) shows the admin's use:\n%s", code, table)
	}
	if code, _ := searchAs(t, hc, c.url+"/ui/runs/"+ref+"/search?q=alpha", bob); code != http.StatusNotFound {
		t.Errorf("bob's search of a run outside his projects = %d, want 404", code)
	}
}

func searchAs(t *testing.T, hc *http.Client, u, token string) (int, string) {
	t.Helper()
	code, _, body := get(t, hc, u, token)
	return code, body
}
