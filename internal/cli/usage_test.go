package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
)

// sacctmgr sets a user's limits within one account (where account=A) and
// an account's MaxJobs/MaxSubmitJobs for each of its users; sbatch past a
// submit limit is refused in Slurm's words; sshare prints the tree.
func TestAccountingCommands(t *testing.T) {
	_, path := policyServer(t, labPolicy)
	mustSacctmgr(t, "-i", "add", "user", "admin", "Account=ml")
	mustSacctmgr(t, "-i", "modify", "user", "admin", "where", "account=ml", "set", "MaxSubmitJobs=1")
	mustSacctmgr(t, "-i", "modify", "account", "ml", "set", "MaxJobs=2")
	p, err := policy.Parse(path, []byte(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Submit[sched.ProjectUserKey("ml", "admin")] != 1 || p.Limits[sched.LimitKey{Scope: sched.ScopeProjectUser, Name: "ml"}].Jobs != 2 {
		t.Fatalf("policy file after sacctmgr:\n%s", readFile(t, path))
	}
	if _, ok := p.Submit[sched.LimitKey{Scope: sched.ScopeUser, Name: "admin"}]; ok {
		t.Errorf("where account=ml set admin's limit over all projects:\n%s", readFile(t, path))
	}
	if out, errs, code := sbatchAs("-A", "ml", "--hold", "--wrap", "true"); code != 0 {
		t.Fatalf("first sbatch: %d %s %s", code, out, errs)
	}
	_, errs, code := sbatchAs("-A", "ml", "--hold", "--wrap", "true")
	if code != 1 || !strings.HasSuffix(errs, "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)\n") {
		t.Errorf("second sbatch: exit %d %q", code, errs)
	}
	// The main account's submissions are not bound by ml's.
	if _, errs, code := sbatchAs("--hold", "--wrap", "true"); code != 0 {
		t.Errorf("sbatch in main: %d %s", code, errs)
	}

	out, errs, code := berthCmd("sshare", "-a", "-P")
	want := "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\n" +
		"root|||1.000000|0|0.000000|\n"
	if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "\n ml||3|") || !strings.Contains(out, "\n  ml|admin|1|") {
		t.Errorf("sshare -a -P: %d %s\n%s", code, errs, out)
	}
	out, _, _ = berthCmd("sshare", "-a")
	head := "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare \n" +
		"-------------------- ---------- ---------- ----------- ----------- ------------- ---------- \n"
	if !strings.HasPrefix(out, head) {
		t.Errorf("sshare -a:\n%s", out)
	}
	if out, errs, code := berthCmd("sshare", "-o", "Account,Bogus"); code != 1 || !strings.Contains(errs, `Invalid field requested: "Bogus"`) {
		t.Errorf("sshare -o Bogus: %d %s %s", code, out, errs)
	}
	if out, errs, code := berthCmd("usage", "--since", "now-7days"); code != 0 || !strings.Contains(out, "PROJECT  USER") {
		t.Errorf("berth usage: %d %s %s", code, out, errs)
	}
}

// sacct's AllocTRES bills what the fleets' weights gave the run's jobs,
// once each job that ran has its usage; before, its CPUs (Slurm's default).
func TestSacctBilling(t *testing.T) {
	started := time.Unix(1_700_000_000, 0)
	r := &api.Run{Jobs: []api.Job{{StartedAt: &started, Usage: &api.JobUsage{Billing: 10.4}}, {StartedAt: &started, Usage: &api.JobUsage{Billing: 6}}, {}}}
	if b, ok := runBilling(r); !ok || b != 16 {
		t.Errorf("billing = %d %v, want 16", b, ok)
	}
	if got := billedTRES(2, 4, 2048, 2, 16); got != "billing=16,cpu=4,gres/gpu=2,mem=2G,node=2" {
		t.Errorf("AllocTRES = %q", got)
	}
	r.Jobs[1].Usage = nil // still running
	if _, ok := runBilling(r); ok {
		t.Error("a run with a job still running has its billing")
	}
}
