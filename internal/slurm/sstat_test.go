package slurm

import (
	"strings"
	"testing"
)

// sstat prints with sacct's fields: its default header, a full default
// row and a parsable row, as Slurm 22.05 printed them.
func TestSstatGolden(t *testing.T) {
	g := readGolden(t, "sstat-j.txt")
	got, err := FormatSacct(nil, SacctOptions{Format: SstatFields, Sstat: true})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "sstat-j.txt", g.stdout, got)

	// Every value of the capture's row, the measured ones as Berth sets
	// them and the others as given.
	g = readGolden(t, "sstat-batch-step.txt")
	lines := strings.Split(g.stdout, "\n")
	names := strings.Split(SstatFields, ",")
	values := strings.Fields(lines[2])
	if len(values) != len(names) {
		t.Fatalf("the capture's row has %d values for %d fields", len(values), len(names))
	}
	rec := AcctRecord{JobID: 3, Step: "batch", NTasks: 1, MaxRSS: 3288 << 10, Extra: map[string]string{}}
	for i, n := range names {
		switch n {
		case "JobID", "NTasks", "MaxRSS":
		default:
			rec.Extra[n] = values[i]
		}
	}
	got, err = FormatSacct([]AcctRecord{rec}, SacctOptions{Format: SstatFields, Sstat: true})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "sstat-batch-step.txt", g.stdout, got)

	g = readGolden(t, "sstat-allsteps.txt")
	rec = AcctRecord{JobID: 3, Step: "batch", NTasks: 1, MaxRSS: 3288 << 10, Extra: map[string]string{"AveCPU": "00:00:00", "MaxVMSize": "5512K"}}
	got, err = FormatSacct([]AcctRecord{rec}, SacctOptions{Format: "JobID,AveCPU,MaxRSS,MaxVMSize,NTasks", Parsable2: true})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "sstat-allsteps.txt", g.stdout, got)
	if FormatMemory(3288<<10) != "3288K" || FormatMemory(3<<30) != "3G" {
		t.Errorf("FormatMemory: %s, %s", FormatMemory(3288<<10), FormatMemory(3<<30))
	}
}

// squeue -s: Slurm's step header, the numbered steps before batch, an
// array task's step id, and -l's time limit.
func TestFormatSqueueSteps(t *testing.T) {
	now := at("10:00:00")
	rows := []StepRow{
		{JobID: 7, Step: "batch", Name: "batch", Partition: "debug", User: "root", NodeList: "n1", Start: at("09:59:00"), TimeLimit: Unlimited},
		{JobID: 7, Step: "1", Name: "a-very-long-name", Partition: "debug", User: "root", NodeList: "n[1-2]", Start: at("09:59:55"), TimeLimit: Unlimited},
		{JobID: 9, ArrayID: 8, ArrayTask: 2, Step: "0", Name: "hostname", Partition: "debug", User: "root", NodeList: "n1", Start: at("09:59:58"), TimeLimit: 30 * 60e9},
	}
	want := "" +
		"         STEPID     NAME PARTITION     USER      TIME NODELIST\n" +
		"            7.1 a-very-l     debug     root      0:05 n[1-2]\n" +
		"        7.batch    batch     debug     root      1:00 n1\n" +
		"          8_2.0 hostname     debug     root      0:02 n1\n"
	if got := FormatSqueueSteps(rows, false, false, now); got != want {
		t.Errorf("squeue -s:\n%s\nwant:\n%s", got, want)
	}
	long := FormatSqueueSteps(rows[2:], true, true, now)
	if long != "          8_2.0 hostname     debug     root     30:00      0:02 n1\n" {
		t.Errorf("squeue -s -l -h: %q", long)
	}
}
