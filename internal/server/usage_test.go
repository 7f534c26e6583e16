package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
)

const usagePolicy = `
billing_weights: "CPU=2.0"
private_data: [jobs]
fleets:
  cpu: {}
  gpu: {billing_weights: "CPU=1,GRES/gpu=10,GRES/gpu:a100=5"}
`

// A job's usage is kept when it ends with its fleet's billing; GET /usage
// sums it by project and user in TRES-seconds; the fairshare tree is fed
// billing-seconds, and finds them again after a restart (from the stored
// usage); with private_data jobs a member sees only their own usage.
func TestAccountingUsage(t *testing.T) {
	dir := t.TempDir()
	rules, err := policy.Parse("usage.yml", []byte(usagePolicy))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, dir, "127.0.0.1:0", rules)
	ctx := context.Background()
	startAgent(t, h, agentOpts{name: "n1", cpus: 2, fleet: "cpu"})
	startAgent(t, h, agentOpts{name: "g1", cpus: 2, fleet: "gpu", gpus: "A100:80GB:2"})
	a := submit(t, h, "type: task\nfleets: [cpu]\nresources: {cpu: 2}\ncommands: [\"sleep 0.3\", \"echo $SLURM_JOB_ACCOUNT\"]\n")
	b := submit(t, h, "type: task\nfleets: [gpu]\nresources: {cpu: 1, gpu: 1}\ncommands: [\"sleep 0.3\"]\n")
	var ua, ub *api.JobUsage
	for _, r := range []struct {
		run  *api.Run
		into **api.JobUsage
	}{{a, &ua}, {b, &ub}} {
		out, end := follow(t, h, r.run.ID)
		if end.Status != api.StatusDone {
			t.Fatalf("run %d ended %s", r.run.ID, end.Status)
		}
		if r.run == a && out != DefaultProject+"\n" {
			t.Errorf("SLURM_JOB_ACCOUNT = %q, want the run's project %s", out, DefaultProject)
		}
		got, err := h.c.Run(ctx, r.run.Name)
		if err != nil || len(got.Jobs) != 1 || got.Jobs[0].Usage == nil {
			t.Fatalf("run %d: %+v %v, want one job with its usage", r.run.ID, got, err)
		}
		*r.into = got.Jobs[0].Usage
	}
	if ua.Fleet != "cpu" || ua.CPUs != 2 || ua.Billing != 4 || !(ua.Seconds > 0) {
		t.Errorf("cpu job's usage = %+v, want fleet cpu, 2 CPUs, billing 4 (CPU=2.0)", ua)
	}
	if ub.Fleet != "gpu" || ub.GPUs != 1 || ub.GPUTypes["a100"] != 1 || ub.Billing != 16 {
		t.Errorf("gpu job's usage = %+v, want billing 1+10+5", ub)
	}

	rep, err := h.c.Usage(ctx, client.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].User != "" || rep.Rows[1].User != "admin" || rep.Rows[1].Runs != 2 || rep.Rows[1].Jobs != 2 {
		t.Fatalf("usage rows = %+v, want main's total and admin's, 2 runs", rep.Rows)
	}
	tres := rep.Rows[1].TRESSeconds
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.002+want*1e-9 }
	for name, want := range map[string]float64{"cpu": 2*ua.Seconds + ub.Seconds, "billing": 4*ua.Seconds + 16*ub.Seconds,
		"gres/gpu": ub.Seconds, "gres/gpu:a100": ub.Seconds} {
		if !near(tres[name], want) {
			t.Errorf("usage %s = %v, want %v", name, tres[name], want)
		}
	}
	if rep.Capacity["cpu"] != 4*rep.Until.Sub(rep.Since).Seconds() {
		t.Errorf("capacity = %v", rep.Capacity)
	}

	raw := func() float64 {
		tree, err := h.c.Fairshare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tree {
			if r.Project == DefaultProject && r.User == "admin" {
				return r.RawUsage
			}
		}
		t.Fatalf("no admin row in %+v", tree)
		return 0
	}
	billed := 4*ua.Seconds + 16*ub.Seconds
	before := raw()
	if math.Abs(before-billed) > billed*1e-3 {
		t.Errorf("fairshare raw usage %v, want the billing-seconds %v (decayed a little at most)", before, billed)
	}

	// A member sees their own usage only (private_data: jobs).
	if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: "ann"}); err != nil {
		t.Fatal(err)
	}
	ann := client.New(h.http.URL, tokenOf(t, h, "ann"))
	if rep, err := ann.Usage(ctx, client.UsageQuery{}); err != nil || len(rep.Rows) != 0 {
		t.Errorf("ann's usage report = %+v %v, want nothing of admin's", rep, err)
	}
	if tree, err := ann.Fairshare(ctx); err != nil || strings.Contains(rowsText(tree), "admin") {
		t.Errorf("ann's fairshare tree = %+v %v, want no admin row", tree, err)
	}
	if code, _ := call(t, h, "GET", testToken, "/usage?since=yesterday", ""); code != http.StatusBadRequest {
		t.Errorf("since=yesterday: %d, want 400", code)
	}

	h.close()
	h = newHarnessWith(t, dir, "127.0.0.1:0", rules)
	if after := raw(); math.Abs(after-before) > billed*1e-3 {
		t.Errorf("after a restart, fairshare raw usage %v, before %v", after, before)
	}
}

func rowsText(rows []api.ShareRow) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(r.Project + "/" + r.User + " ")
	}
	return b.String()
}

// 100 submissions at once against a user's MaxSubmitJobs=10 in their
// project: exactly 10 are taken, the others refused with Slurm's reason
// and sbatch's words; another user of the project is not bound.
func TestSubmitLimitUnderConcurrency(t *testing.T) {
	rules, err := policy.Parse("limits.yml", []byte("projects:\n  main:\n    users:\n      ann: {limits: {submit: 10}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, t.TempDir(), "127.0.0.1:0", rules)
	ctx := context.Background()
	if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: "ann"}); err != nil {
		t.Fatal(err)
	}
	ann := client.New(h.http.URL, tokenOf(t, h, "ann"))
	req := api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true}
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken, refused := 0, 0
	var other []error
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ann.Submit(ctx, req)
			mu.Lock()
			defer mu.Unlock()
			var apiErr *client.APIError
			switch {
			case err == nil:
				taken++
			case errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest &&
				strings.Contains(err.Error(), "AssocMaxSubmitJobLimit: user ann in project main") &&
				strings.Contains(err.Error(), "Slurm: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if taken != 10 || refused != 90 || len(other) > 0 {
		t.Fatalf("taken %d, refused %d, other answers %v; want 10 and 90", taken, refused, other)
	}
	if rs, err := ann.Runs(ctx, client.ListOptions{}); err != nil || len(rs) != 10 {
		t.Errorf("ann has %d runs (%v), want 10", len(rs), err)
	}
	if _, err := h.c.Submit(ctx, req); err != nil {
		t.Errorf("admin, not bound by ann's limit: %v", err)
	}
}
