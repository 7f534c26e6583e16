package cli

import (
	"bufio"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/server"
	"github.com/berth-hq/berth/internal/slurmconv/convtest"
)

// sprio, as the link named sprio runs it: Slurm's default columns for the
// server's weights (sprio.c), the pending jobs sorted by id, each row's
// factors adding up to its PRIORITY as in Slurm, -w the weights, -l and -n
// their own layouts, -j of no pending job Slurm's sentence.
func TestSprio(t *testing.T) {
	if got := Argv([]string{"/usr/local/bin/sprio", "-w"}); !cmp.Equal(got, []string{"slurm-sprio", "-w"}) {
		t.Errorf("Argv of the sprio link: %q", got)
	}
	testServer(t)
	var ids []string
	for range 3 {
		out, errs, code := slurmCmd("sbatch", "--parsable", "-c", "4", "--wrap", "sleep 100")
		if code != 0 {
			t.Fatalf("sbatch: %d %s", code, errs)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	// The first holds the node's 4 CPUs; the other two wait.
	var out string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _, _ = slurmCmd("slurm-sprio")
		if strings.Count(out, "\n") == 3 || time.Now().After(deadline) {
			break
		}
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	const header = "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE  PARTITION        QOS"
	if len(lines) != 3 || lines[0] != header {
		t.Fatalf("sprio:\n%s\nwant the header\n%s\nand jobs %s and %s", out, header, ids[1], ids[2])
	}
	for i, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != 9 || f[0] != ids[i+1] || f[1] != "berth" || len(l) != len(header) {
			t.Errorf("sprio row %q: want job %s in partition berth, as wide as the header", l, ids[i+1])
			continue
		}
		n := make([]int64, 9)
		for k := 2; k < 9; k++ {
			n[k], _ = strconv.ParseInt(f[k], 10, 64)
		}
		if sum := n[3] + n[4] + n[5] + n[6] + n[7] + n[8]; sum != n[2] {
			t.Errorf("sprio row %q: the factors add up to %d, not its PRIORITY", l, sum)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-w"}, header + "\n        Weights                               1       1000      10000       1000       1000      10000\n"},
		{[]string{"-h", "-w"}, "        Weights                               1       1000      10000       1000       1000      10000\n"},
		{[]string{"-j", "99"}, "Unable to find jobs matching user/id(s) specified\n"},
		{[]string{"-l", "-w"}, "          JOBID PARTITION     USER   PRIORITY       SITE        AGE      ASSOC  FAIRSHARE    JOBSIZE  PARTITION        QOS        NICE                 TRES\n" +
			"        Weights                                        1       1000          0      10000       1000       1000      10000                                 \n"},
		{[]string{"-n", "-w"}, "          JOBID PARTITION PRIORITY   AGE        FAIRSHARE  JOBSIZE    PARTITION  QOS       \n" +
			"        Weights                      1000       10000      1000       1000       10000     \n"},
	} {
		got, errs, code := slurmCmd(append([]string{"slurm-sprio"}, tc.args...)...)
		if d := cmp.Diff([]any{tc.want, "", 0}, []any{got, errs, code}); d != "" {
			t.Errorf("sprio %s (-want +got):\n%s", strings.Join(tc.args, " "), d)
		}
	}
	got, _, _ := slurmCmd("slurm-sprio", "-h", "-j", ids[2], "-u", "root,admin")
	if f := strings.Fields(got); len(f) != 10 || f[0] != ids[2] {
		t.Errorf("sprio -h -j %s -u: %q", ids[2], got)
	}
}

// scontrol show config prints, in Slurm's layout and order (the golden
// scontrol-show-config.txt), the keys Berth has a value for, with the
// server's settings.
func TestScontrolShowConfig(t *testing.T) {
	testServerWith(t, 4, func(cfg *server.Config) {
		cfg.StopGrace, cfg.UnkillableTimeout, cfg.MaxArraySize, cfg.Depth = 30*time.Second, 2*time.Minute, 100001, 500
	}, nil)
	out, errs, code := slurmCmd("scontrol", "show", "config")
	if code != 0 || errs != "" {
		t.Fatalf("scontrol show config: exit %d, %q", code, errs)
	}
	_, golden := convtest.ReadGolden(t, "scontrol-show-config.txt")
	order := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(golden))
	for i := 0; sc.Scan(); i++ {
		if k, _, ok := strings.Cut(sc.Text(), " = "); ok && len(k) >= 23 {
			order[strings.TrimSpace(k)] = i
		}
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "Configuration data as of ") || !timestampRE.MatchString(lines[0]) {
		t.Errorf("first line %q", lines[0])
	}
	if tail := strings.Join(lines[len(lines)-3:], "\n"); tail != "\nSlurmctld(primary) at 127.0.0.1 is UP\n" {
		t.Errorf("last lines %q", tail)
	}
	got := map[string]string{}
	last := -1
	for _, l := range lines[1 : len(lines)-3] {
		k, v, ok := strings.Cut(l, " = ")
		key := strings.TrimSpace(k)
		if !ok || len(k) != max(23, len(key)) {
			t.Errorf("line %q is not %%-23s = %%s", l)
			continue
		}
		got[key] = v
		if i, ok := order[key]; ok {
			if i < last {
				t.Errorf("%s out of Slurm's order", key)
			}
			last = i
		}
	}
	for k, v := range map[string]string{
		"ClusterName": "berth", "KillWait": "30 sec", "UnkillableStepTimeout": "120 sec", "MaxArraySize": "100001",
		"SchedulerType": "sched/backfill", "SchedulerParameters": "bf_max_job_test=500", "SelectType": "select/cons_tres",
		"SLURM_VERSION": "22.05.8", "PriorityType": "priority/multifactor", "PriorityWeightFairShare": "10000",
		"PriorityMaxAge": "7-00:00:00", "PriorityDecayHalfLife": "7-00:00:00", "MinJobAge": "300 sec", "SlurmdTimeout": "60 sec",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// The golden's keys Berth prints keep their format there too.
	for _, k := range []string{"ClusterName", "KillWait", "MaxArraySize", "SchedulerType", "SelectType", "SLURM_VERSION", "UnkillableStepTimeout"} {
		if _, ok := order[k]; !ok {
			t.Errorf("%s is not in the golden", k)
		}
	}
}
