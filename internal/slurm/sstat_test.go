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
