package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium finds Debian's chromium (make test-deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/lib/chromium/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed: run `make test-deps` (scripts/test-chromium.sh) for the dashboard's browser test")
	return ""
}

// TestBrowser drives the dashboard in a real headless chromium: sign in
// through the form (a bad token first), watch a run submitted through the
// API reach done on the runs page without a reload, read its log on its
// page, submit from the submit page and watch that run reach done on its
// page, search its log, open the usage page and the queue, drain and
// resume the node on the fleets page. Any
// console error or uncaught exception fails it. Screenshots of each page
// go to $BERTH_TEST_ARTIFACTS (or the test's directory); the runs page's
// weight and time to first paint, and the submit and usage pages', are
// logged.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	c := newCluster(t)
	shots := os.Getenv("BERTH_TEST_ARTIFACTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var mu sync.Mutex
	var consoleErrors []string
	if err := chromedp.Do(ctx); err != nil { // starts the browser (no timeout on this first call)
		t.Fatal(err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				consoleErrors = append(consoleErrors, "console.error: "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				consoleErrors = append(consoleErrors, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			buf, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			p := filepath.Join(shots, name+".png")
			t.Logf("screenshot %s", p)
			return chromedp.Void{}, os.WriteFile(p, buf, 0o644)
		}
	}
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 30*time.Second) }
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, scancel := step()
		defer scancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		sctx, scancel := step()
		defer scancel()
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	// Sign in: a bad token is refused with the reason, a good one kept.
	run("login page", chromedp.Navigate(c.url+"/"), chromedp.WaitVisible(chromedp.ID("token")))
	run("bad token",
		chromedp.SendKeys(chromedp.ID("token"), "not-a-token"), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("login-error")), shot("login"))
	if msg := text("#login-error"); !strings.Contains(msg, "unknown token") {
		t.Errorf("login error = %q", msg)
	}
	run("good token",
		chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("runs")))

	// The runs page (finished runs too): a run submitted behind its back appears and reaches
	// done through the live stream; the page is never reloaded (a mark set
	// on its window survives).
	type measure struct {
		FirstPaint, FCP float64
		Bytes, Encoded  float64
		Resources       int
	}
	// weigh logs the open page's weight and first paint (the figures in
	// docs/dashboard.md).
	weigh := func(page string) {
		t.Helper()
		sctx, scancel := step()
		defer scancel()
		// Chromium records the paint entries a moment after the page is
		// visible: wait for first-contentful-paint (a page that never
		// paints fails here, with the figures below).
		_, _ = chromedp.Run(sctx, chromedp.Poll[bool](`performance.getEntriesByName('first-contentful-paint').length > 0`, chromedp.WithPollingTimeout(5*time.Second)))
		perf, err := chromedp.Run(sctx, chromedp.Evaluate[measure](`(() => {
		const paint = n => (performance.getEntriesByName(n)[0] || {startTime: -1}).startTime;
		const nav = performance.getEntriesByType('navigation')[0];
		const res = performance.getEntriesByType('resource').filter(r => !r.name.includes('/events') && !r.name.includes('/log') && !r.name.includes('/search'));
		return {FirstPaint: paint('first-paint'), FCP: paint('first-contentful-paint'),
			Bytes: nav.decodedBodySize + res.reduce((s, r) => s + r.decodedBodySize, 0),
			Encoded: nav.encodedBodySize + res.reduce((s, r) => s + r.encodedBodySize, 0), Resources: res.length};
	})()`))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s page: %d bytes (the page and %d resources; %d as sent); first paint %.0f ms, first contentful paint %.0f ms after navigation start",
			page, int(perf.Bytes), perf.Resources, int(perf.Encoded), perf.FirstPaint, perf.FCP)
		if perf.FCP <= 0 || perf.Bytes <= 0 || perf.Resources < 3 {
			t.Errorf("%s page: no measurement: %+v", page, perf)
		}
	}
	run("runs page", chromedp.Navigate(c.url+"/ui/runs?all=1"), chromedp.WaitVisible(chromedp.ID("runs")), chromedp.Sleep(300*time.Millisecond))
	weigh("runs")
	run("mark", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](`window.notReloaded = true`)(ctx, tg)
		return chromedp.Void{}, err
	})
	r := c.submit(t, "type: task\nname: browser1\ncommands:\n  - sleep 1\n  - echo hello-from-the-browser-test\n")
	row := fmt.Sprintf(`#run-%d`, r.ID)
	run("run appears", chromedp.WaitVisible(chromedp.CSS(row)))
	if err := func() error {
		sctx, scancel := step()
		defer scancel()
		return chromedp.Do(sctx, chromedp.WaitVisible(chromedp.CSS(row+`[data-status="done"]`)), shot("runs"))
	}(); err != nil {
		now, _ := c.admin.Run(context.Background(), fmt.Sprint(r.ID))
		t.Fatalf("the runs page did not show run %d done (%v); the API says %s; the page shows %q", r.ID, err, now.Status, text("#runs"))
	}
	sctx, scancel := step()
	kept, err := chromedp.Run(sctx, chromedp.Evaluate[bool](`window.notReloaded === true`))
	scancel()
	if err != nil || !kept {
		t.Fatalf("the runs page was reloaded (%v)", err)
	}
	run("phone width", chromedp.EmulateViewport(390, 844), shot("runs-phone"), chromedp.EmulateViewport(1280, 900))

	// The run's page: its log, followed live, and its end.
	run("run page", chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.ID("log-end")),
		func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](`document.getElementById('log-end').textContent.includes('done')`, chromedp.WithPollingTimeout(20*time.Second))(ctx, tg)
			return chromedp.Void{}, err
		}, shot("run"))
	if lt, end := text("#log"), text("#log-end"); !strings.Contains(lt, "hello-from-the-browser-test") || !strings.Contains(end, "done") {
		t.Errorf("run page log %q, end %q", lt, end)
	}

	// Submit from the Submit page: the plan, then Submit; the new run's
	// page follows it to done through its live updates.
	run("submit page", chromedp.Navigate(c.url+"/ui/submit"), chromedp.WaitVisible(chromedp.ID("config")))
	weigh("submit")
	run("plan",
		chromedp.SetValue(chromedp.ID("config"), "type: task\nname: fromform\ncommands:\n  - sleep 1\n  - echo needle-1\n  - echo hay\n  - echo 'needle-<2>'\n"),
		chromedp.Click(chromedp.ID("plan-btn")), chromedp.WaitVisible(chromedp.ID("plan")), shot("submit-plan"))
	run("submit", chromedp.Click(chromedp.ID("submit-btn")), chromedp.WaitVisible(chromedp.ID("log-end")),
		func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](`document.getElementById('run-status').textContent === 'done' && document.getElementById('log-end').textContent.includes('done')`, chromedp.WithPollingTimeout(25*time.Second))(ctx, tg)
			return chromedp.Void{}, err
		})
	if h := text("main h1"); !strings.Contains(h, "fromform") {
		t.Errorf("after Submit the page is %q, want the run fromform's", h)
	}
	// Search its log: the results come in beside the followed log.
	run("search", chromedp.SendKeys(chromedp.ID("log-q"), "needle"), chromedp.Click(chromedp.ID("log-search")),
		chromedp.WaitVisible(chromedp.ID("search-count")), shot("run-search"))
	if n, lt := text("#search-count"), text("#log"); !strings.HasPrefix(n, "2 matching lines") || !strings.Contains(lt, "hay") {
		t.Errorf("search: %q; the log still shows %q", n, lt)
	}
	sctx, scancel = step()
	marks, err := chromedp.Run(sctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#search-results mark')].map(m => m.textContent)`))
	scancel()
	if err != nil || len(marks) != 2 || marks[0] != "needle" {
		t.Errorf("marked %q (%v), want needle twice", marks, err)
	}
	run("usage", chromedp.Navigate(c.url+"/ui/usage"), chromedp.WaitVisible(chromedp.ID("fairshare")), shot("usage"))
	weigh("usage")
	if u := text("#usage"); !strings.Contains(u, "admin") {
		t.Errorf("usage table = %q, want the admin's runs", u)
	}

	run("queue", chromedp.Navigate(c.url+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS("main h1")), shot("queue"))

	// Fleets: drain node1 from its card, then resume it.
	run("fleets", chromedp.Navigate(c.url+"/ui/fleets"), chromedp.WaitVisible(chromedp.ID("drain-node1")),
		chromedp.SendKeys(chromedp.ID("reason-node1"), "browser test"), chromedp.Click(chromedp.ID("drain-node1")),
		chromedp.WaitVisible(chromedp.ID("resume-node1")), shot("fleets-drained"))
	ns, err := c.admin.Nodes(context.Background())
	if err != nil || ns[0].Drain == nil || ns[0].Drain.Reason != "browser test" {
		t.Fatalf("after Drain: %+v %v", ns, err)
	}
	run("resume", chromedp.Click(chromedp.ID("resume-node1")), chromedp.WaitVisible(chromedp.ID("drain-node1")), shot("fleets"))
	if ns, _ := c.admin.Nodes(context.Background()); ns[0].Drain != nil {
		t.Fatal("after Resume node1 is still drained")
	}
	sctx, scancel = step()
	cells, err := chromedp.Run(sctx, chromedp.Nodes(chromedp.CSSAll("#node-node1 .gpu")))
	scancel()
	if err != nil || len(cells) != 2 {
		t.Errorf("node1 shows %d GPU cells (%v), want 2", len(cells), err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range consoleErrors {
		t.Errorf("browser console: %s", e)
	}
}
