package cli

import (
	"strings"
	"testing"
	"time"

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

// sreport's layout: the header block, its columns and widths, and its
// time formats, as src/sreport prints them.
func TestSreport(t *testing.T) {
	policyServer(t, labPolicy)
	out, errs, code := berthCmd("sreport", "-t", "hours", "cluster", "AccountUtilizationByUser", "start=2026-01-01", "end=2026-01-02")
	dashes := strings.Repeat("-", 80)
	want := dashes + "\n" +
		"Cluster/Account/User Utilization 2026-01-01T00:00:00 - 2026-01-01T23:59:59 (86400 secs)\n" +
		"Usage reported in CPU Hours\n" + dashes + "\n" +
		"  Cluster         Account     Login     Proper Name     Used   Energy \n" +
		"--------- --------------- --------- --------------- -------- -------- \n" +
		"    berth            root                                  0        0 \n"
	if time.Local.String() == "UTC" || time.Local.String() == "Local" {
		if code != 0 || out != want {
			t.Errorf("sreport cluster AccountUtilizationByUser: %d %s\n%s", code, errs, out)
		}
	}
	out, _, code = berthCmd("sreport", "-P", "-n", "user", "TopUsage")
	if code != 0 || out != "" {
		t.Errorf("sreport -P -n user TopUsage with no usage: %d %q", code, out)
	}
	if _, errs, code := berthCmd("sreport", "job", "SizesByAccount"); code != 1 || !strings.Contains(errs, "not job SizesByAccount") {
		t.Errorf("sreport job SizesByAccount: %d %s", code, errs)
	}
	for _, tc := range []struct {
		format       string
		value, total float64
		want         string
		width        int
	}{
		{"minutes", 5430, 86400, "90", 8},
		{"hours", 5400, 86400, "2", 8},
		{"seconds", 123456789, 1e9, "123456789", 9},
		{"percent", 21600, 86400, "25.00%", 8},
		{"minper", 21600, 86400, "360(25.00%)", 17},
	} {
		tf, err := parseSreportTime(tc.format)
		if err != nil {
			t.Fatal(err)
		}
		if got := tf.format(tc.value, tc.total); got != tc.want {
			t.Errorf("-t %s of %v: %q, want %q", tc.format, tc.value, got, tc.want)
		}
		if got := tf.usageWidth(tc.value); got != tc.width {
			t.Errorf("-t %s width for %v: %d, want %d", tc.format, tc.value, got, tc.width)
		}
	}
}
