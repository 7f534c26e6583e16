package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/server"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// policyServer is a server in this process reading and writing the
// policy file it returns, with one node whose "agent" is this test, and a
// user bob who is not an admin (token "bob-token").
func policyServer(t *testing.T, text string) (*client.Client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c := testServerWith(t, 8, func(cfg *server.Config) { cfg.Rules, cfg.PolicyFile = rules, path }, func(ctx context.Context, st *store.SQLite) {
		bob, err := st.EnsureUser(ctx, "bob", false)
		if err == nil {
			err = st.AddToken(ctx, bob, server.HashToken("bob-token"), "bob")
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	return c, path
}

// sacctmgr runs the command with stdin and returns its output and status.
func sacctmgr(stdin string, args ...string) (string, string, int) {
	var out, errw bytes.Buffer
	code := Main(append([]string{"sacctmgr"}, args...), strings.NewReader(stdin), &out, &errw)
	return out.String(), errw.String(), code
}

func mustSacctmgr(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := sacctmgr("", args...)
	if code != 0 {
		t.Fatalf("sacctmgr %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const labPolicy = `# The lab's scheduling rules: ask Ana before changing them.
qos:
  normal: {}   # everyone's
  # for deadlines
  high: {priority: 10}
projects:
  ml:
    shares: 3
`

// add, modify and delete go through the server, keep the file's comments
// and order, and show, GET /policy and the file agree at once.
func TestSacctmgrRoundTrip(t *testing.T) {
	c, path := policyServer(t, labPolicy)
	out := mustSacctmgr(t, "-i", "add", "account", "physics", "Fairshare=10", "GrpTRES=cpu=64,gres/gpu=8", "MaxWall=2-00:00:00")
	want := ` Adding Account(s)
  physics
 Settings
  Description     = Account Name
  Organization    = Parent/Account Name
 Associations
  A = physics    C = berth     
 Settings
  Fairshare     = 10
  GrpTRES       = cpu=64,gres/gpu=8
  MaxWall       = 2-00:00:00
  Parent        = root
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("add account (-want +got):\n%s", diff)
	}
	// Options may follow the command, as glibc's getopt permutes them.
	mustSacctmgr(t, "add", "user", "alice", "Account=physics", "Fairshare=2", "-i")
	out = mustSacctmgr(t, "-i", "modify", "user", "alice", "set", "MaxJobs=4", "where", "Account=physics")
	if !strings.HasPrefix(out, " Modified user associations...\n  C = berth      A = physics    U = alice    \n") {
		t.Errorf("modify user:\n%s", out)
	}
	mustSacctmgr(t, "-i", "modify", "qos", "high", "set", "Priority=100", "Preempt=normal", "PreemptMode=requeue", "GrpTRES=gres/gpu=16",
		"MaxTRESPerUser=cpu=8,mem=64G", "MaxJobsPerUser=2", "MaxWall=4:00:00")
	mustSacctmgr(t, "-i", "modify", "account", "where", "name=ml", "set", "GrpJobs=20")
	want = `# The lab's scheduling rules: ask Ana before changing them.
qos:
  normal: {} # everyone's
  # for deadlines
  high: {priority: 100, preempt: [normal], preempt_mode: requeue, limits: {gpu: 16, wall: 4h}, user_limits: {cpu: 8, memory: 65536MB, jobs: 2}}
projects:
  ml:
    shares: 3
    limits:
      jobs: 20
  physics: {shares: 10, limits: {cpu: 64, gpu: 8, wall: 2d}, users: {alice: {shares: 2, limits: {jobs: 4}}}}
`
	if diff := cmp.Diff(want, readFile(t, path)); diff != "" {
		t.Errorf("policy file (-want +got):\n%s", diff)
	}
	// show and the API see it at once.
	assoc := mustSacctmgr(t, "-P", "-n", "show", "assoc")
	for _, line := range []string{"berth|physics|||10||cpu=64,gres/gpu=8||||2-00:00:00|normal|", "berth|physics|alice||2|||4||||normal|"} {
		if !strings.Contains(assoc, line+"\n") {
			t.Errorf("show assoc lacks %q:\n%s", line, assoc)
		}
	}
	if out := mustSacctmgr(t, "-P", "-n", "show", "qos"); !strings.Contains(out, "high|100|normal|REQUEUE|gres/gpu=16||04:00:00|cpu=8,mem=65536M|2|") {
		t.Errorf("show qos:\n%s", out)
	}
	p, err := c.Policy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var alice bool
	for _, a := range p.Associations {
		alice = alice || a.Project == "physics" && a.User == "alice" && a.Shares == 2
	}
	if !alice || p.QOS[0].Name != "high" || p.QOS[0].Priority != 100 {
		t.Errorf("GET /policy: %+v", p)
	}
	// An account with users stays until they are gone.
	out, errs, code := sacctmgr("", "-i", "delete", "account", "physics")
	if code != 1 || !strings.Contains(errs, "account physics still has users: alice") {
		t.Errorf("delete account with users: exit %d\n%s%s", code, out, errs)
	}
	out = mustSacctmgr(t, "-i", "delete", "user", "alice", "account=physics")
	if out != " Deleting user associations...\n  C = berth      A = physics    U = alice    \n" {
		t.Errorf("delete user: %q", out)
	}
	if out := mustSacctmgr(t, "-i", "delete", "account", "physics"); out != " Deleting accounts...\n  C = berth      A = physics   \n" {
		t.Errorf("delete account: %q", out)
	}
	if out := mustSacctmgr(t, "-i", "delete", "qos", "high"); out != " Deleting QOS(s)...\n  high\n" {
		t.Errorf("delete qos: %q", out)
	}
	mustSacctmgr(t, "-i", "modify", "account", "ml", "set", "GrpJobs=-1")
	want = `# The lab's scheduling rules: ask Ana before changing them.
qos:
  normal: {} # everyone's
projects:
  ml:
    shares: 3
    limits: {}
`
	if diff := cmp.Diff(want, readFile(t, path)); diff != "" {
		t.Errorf("policy file after the deletes (-want +got):\n%s", diff)
	}
}

// Refusals change nothing: a field the file has no place for, an unknown
// entity or account, a bad value, a change by a user who is not an admin.
func TestSacctmgrRefusals(t *testing.T) {
	_, path := policyServer(t, labPolicy)
	tests := map[string]struct {
		args []string
		want string
	}{
		"no home":         {[]string{"-i", "add", "account", "chem", "Description=Chemistry"}, " Unknown option: Description=Chemistry\n Berth's policy file has no place for Description of a account"},
		"qos field":       {[]string{"-i", "modify", "qos", "high", "set", "UsageFactor=2"}, "no place for UsageFactor of a qos"},
		"unknown qos":     {[]string{"-i", "modify", "qos", "gold", "set", "Priority=1"}, " Nothing modified"},
		"unknown account": {[]string{"-i", "add", "user", "alice", "Account=chem"}, " This account 'chem' doesn't exist."},
		"unknown entity":  {[]string{"-i", "add", "cluster", "other"}, "works on qos, account and user; not cluster"},
		"bad value":       {[]string{"-i", "modify", "qos", "high", "set", "Priority=lots"}, ` Bad value for Priority: "lots"`},
		"bad TRES":        {[]string{"-i", "modify", "qos", "high", "set", "GrpTRES=node=4"}, " Unknown TRES: node=4"},
		"invalid result":  {[]string{"-i", "delete", "qos", "normal"}, "the change would leave the policy file invalid"},
		"nothing deleted": {[]string{"-i", "delete", "user", "zed"}, " Nothing deleted"},
		"condition":       {[]string{"-i", "modify", "user", "alice", "where", "Partition=gpu", "set", "MaxJobs=1"}, " Unknown condition: Partition=gpu"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, errs, code := sacctmgr("", tc.args...)
			if code != 1 || !strings.Contains(errs, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, tc.want)
			}
			if got := readFile(t, path); got != labPolicy {
				t.Errorf("the file changed:\n%s", got)
			}
		})
	}
	t.Setenv("BERTH_TOKEN", "bob-token")
	out, errs, code := sacctmgr("", "-i", "add", "account", "chem")
	if code != 1 || !strings.Contains(errs, "admin") || readFile(t, path) != labPolicy {
		t.Errorf("bob's add: exit %d %q %q", code, out, errs)
	}
	if out := mustSacctmgr(t, "-P", "-n", "show", "qos"); !strings.Contains(out, "high|10|") {
		t.Errorf("bob's show: %q", out)
	}
}

// Without -i sacctmgr asks, and only y commits.
func TestSacctmgrConfirm(t *testing.T) {
	_, path := policyServer(t, labPolicy)
	for _, in := range []string{"n\n", ""} {
		out, _, code := sacctmgr(in, "add", "qos", "low")
		if code != 0 || !strings.HasSuffix(out, "Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): "+map[string]string{"": "\n"}[in]+" Changes Discarded\n") {
			t.Errorf("answer %q: exit %d\n%s", in, code, out)
		}
	}
	if readFile(t, path) != labPolicy {
		t.Fatal("a discarded change was written")
	}
	if _, _, code := sacctmgr("y\n", "add", "qos", "low"); code != 0 || !strings.Contains(readFile(t, path), "  low: {}\n") {
		t.Errorf("answer y: exit %d, file:\n%s", code, readFile(t, path))
	}
}

// editWhileAsking is stdin whose first read edits the policy file behind
// sacctmgr's back (another admin), then answers y.
type editWhileAsking struct {
	path string
	done bool
}

func (r *editWhileAsking) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	r.done = true
	b, _ := os.ReadFile(r.path)
	os.WriteFile(r.path, append(b, "users:\n  eve: {limits: {jobs: 1}}\n"...), 0o644)
	return copy(p, "y\n"), nil
}

// A file changed between read and write is read again and the change made
// on it: neither edit is lost.
func TestSacctmgrRetriesOnConflict(t *testing.T) {
	_, path := policyServer(t, labPolicy)
	var out, errw bytes.Buffer
	if code := Main([]string{"sacctmgr", "add", "account", "chem"}, &editWhileAsking{path: path}, &out, &errw); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errw.String())
	}
	got := readFile(t, path)
	if !strings.Contains(got, "  chem: {}\n") || !strings.Contains(got, "  eve: {limits: {jobs: 1}}\n") {
		t.Errorf("file:\n%s", got)
	}
}

// A MaxJobs set live holds the user's next run with Slurm's reason; runs
// already placed go on; lifting it lets the held run start.
func TestSacctmgrLimitEnforced(t *testing.T) {
	c, _ := policyServer(t, labPolicy)
	ctx := context.Background()
	submitRun := func() *api.Run {
		task, err := spec.Parse("t.yml", []byte("type: task\nresources: {cpu: 1}\ncommands: [\"sleep 60\"]\n"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Submit(ctx, api.SubmitRequest{Spec: task})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waitRun := func(id int64, ok func(*api.Run) bool) {
		t.Helper()
		waitFor(t, func() bool {
			r, err := c.Run(ctx, formatID(id))
			return err == nil && ok(r)
		})
	}
	placed := func(r *api.Run) bool { return len(r.Jobs) == 1 && r.Jobs[0].Node == "n1" }
	a, b := submitRun(), submitRun()
	waitRun(a.ID, placed)
	waitRun(b.ID, placed)
	mustSacctmgr(t, "-i", "add", "user", "admin", "Account=ml")
	mustSacctmgr(t, "-i", "modify", "user", "admin", "set", "MaxJobs=1")
	third := submitRun()
	waitRun(third.ID, func(r *api.Run) bool { return r.Status == api.StatusSubmitted && r.Reason == "AssocMaxJobsLimit" })
	for _, id := range []int64{a.ID, b.ID} {
		if r, _ := c.Run(ctx, formatID(id)); r == nil || r.Status.Finished() {
			t.Errorf("run %d was stopped by the tighter limit", id)
		}
	}
	mustSacctmgr(t, "-i", "modify", "user", "admin", "set", "MaxJobs=-1")
	waitRun(third.ID, placed)
}

func formatID(id int64) string { return strconv.FormatInt(id, 10) }

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
