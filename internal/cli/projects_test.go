package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/client"
)

// berthCmd runs a berth command line and returns its output and status.
func berthCmd(args ...string) (string, string, int) {
	var out, errw bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errw)
	return out.String(), errw.String(), code
}

// A project is a Slurm account: on a fresh server every user who can
// submit has an association with the default account (issue 14's defect
// 9); the policy file's accounts are projects; sacctmgr add account and
// add user make a project and a membership, delete removes them; -A
// chooses among the user's projects, and one they are not in is refused
// in Slurm's words.
func TestSlurmAccountsAreProjects(t *testing.T) {
	_, path := policyServer(t, labPolicy)
	_ = path
	ctx := context.Background()
	bob := client.New(mustEnv(t, "BERTH_URL"), "bob-token")

	// Issue 14, defect 9: bob's accounts, as a job script asks for them.
	t.Setenv("BERTH_TOKEN", "bob-token")
	if got := mustSacctmgr(t, "-n", "-s", "list", "user", "bob", "format=account%20"); got != "                main \n" {
		t.Errorf("bob's accounts: %q, want main right-aligned in 20", got)
	}
	if _, errs, code := sbatchAs("-A", "ml", "--wrap", "true"); code != 1 ||
		!strings.HasSuffix(errs, "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n") {
		t.Errorf("bob's sbatch -A ml (not a member): exit %d %q", code, errs)
	}

	t.Setenv("BERTH_TOKEN", "tok")
	// The policy file's account ml is a project.
	if out, _, code := berthCmd("project", "list"); code != 0 || !strings.Contains(out, "ml ") || !strings.Contains(out, "main ") {
		t.Errorf("berth project list (admin): %d %q", code, out)
	}
	mustSacctmgr(t, "-i", "add", "account", "physics")
	mustSacctmgr(t, "-i", "add", "user", "bob", "account=physics")
	mustSacctmgr(t, "-i", "add", "user", "carol", "account=ml")
	if got := mustSacctmgr(t, "-n", "-P", "-s", "list", "user", "bob", "format=user,account"); got != "bob|main\nbob|physics\n" {
		t.Errorf("bob's associations: %q", got)
	}
	// carol is made a Berth user, a member of ml and (as every user) of
	// the default project, her default account.
	if got := mustSacctmgr(t, "-n", "-P", "-s", "list", "user", "carol", "format=user,defaultaccount,account"); got != "carol|main|main\ncarol|main|ml\n" {
		t.Errorf("carol, made by sacctmgr add user: %q", got)
	}
	ms, err := bob.Members(ctx, "physics")
	if err != nil || len(ms) != 1 || ms[0].User != "bob" || ms[0].Role != "user" {
		t.Errorf("physics' members as bob sees them: %+v %v", ms, err)
	}

	t.Setenv("BERTH_TOKEN", "bob-token")
	out, errs, code := sbatchAs("--parsable", "-H", "-A", "physics", "--wrap", "true")
	if code != 0 {
		t.Fatalf("bob's sbatch -A physics: %d %q", code, errs)
	}
	run, err := bob.Run(ctx, strings.TrimSpace(out))
	if err != nil || run.Project != "physics" {
		t.Errorf("bob's run: %+v %v, want project physics", run, err)
	}
	if got := mustSacctmgr(t, "-n", "-P", "list", "assoc", "user=bob", "format=account,user"); got != "main|bob\nphysics|bob\n" {
		t.Errorf("bob's assoc: %q", got)
	}

	t.Setenv("BERTH_TOKEN", "tok")
	if _, err := client.New(mustEnv(t, "BERTH_URL"), "tok").Stop(ctx, run.Name, true); err != nil {
		t.Fatal(err)
	}
	mustSacctmgr(t, "-i", "delete", "user", "bob", "account=physics")
	if ms, err := bob.Members(ctx, "physics"); httpStatusOf(err) != 404 {
		t.Errorf("physics after bob's removal, as bob: %v %v, want 404", ms, err)
	}
	t.Setenv("BERTH_TOKEN", "bob-token")
	if _, errs, code := sbatchAs("-A", "physics", "--wrap", "true"); code != 1 || !strings.Contains(errs, "Invalid account") {
		t.Errorf("bob's sbatch -A physics after removal: %d %q", code, errs)
	}
}

func sbatchAs(args ...string) (string, string, int) {
	var out, errw bytes.Buffer
	code := Main(append([]string{"sbatch"}, args...), strings.NewReader(""), &out, &errw)
	return out.String(), errw.String(), code
}

func mustEnv(t *testing.T, k string) string {
	t.Helper()
	v := os.Getenv(k)
	if v == "" {
		t.Fatalf("%s is not set", k)
	}
	return v
}

// httpStatusOf is an API error's status (0: none).
func httpStatusOf(err error) int {
	var e *client.APIError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}
