package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tools that read Slurm's output mostly split lines on whitespace (squeue's
// default columns) or on "|" (sacct -P, squeue -o with | separators). These
// tests read our output the way such tools do and check they get the data
// back.

func TestToolsParseSqueue(t *testing.T) {
	jobs := queueAt0118()
	out, _, err := FormatSqueue(jobs, SqueueOptions{Now: at("01:26:18")})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := strings.Fields(lines[0])
	if diff := cmp.Diff([]string{"JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"}, header); diff != "" {
		t.Fatalf("header (-want +got):\n%s", diff)
	}
	type row struct{ ID, State, ReasonOrNodes string }
	var got []row
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(header) {
			t.Fatalf("line %q has %d fields, want %d", l, len(f), len(header))
		}
		got = append(got, row{f[0], f[4], f[7]})
	}
	want := []row{
		{"10_[3-5%2]", "PD", "(JobArrayTaskLimit)"}, {"13", "PD", "(Resources)"}, {"14", "PD", "(Priority)"},
		{"15", "PD", "(Dependency)"}, {"16", "PD", "(DependencyNeverSatisfied)"}, {"18", "PD", "(BeginTime)"},
		{"19", "PD", "(Priority)"}, {"17", "PD", "(JobHeldUser)"}, {"10_1", "R", "localhost"}, {"10_2", "R", "localhost"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}

	// A script's usual query: squeue -h -o "%i|%T|%M|%D|%R".
	out, _, _ = FormatSqueue(jobs, SqueueOptions{NoHeader: true, Format: "%i|%T|%M|%D|%R", Now: at("01:26:18")})
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 5 {
			t.Fatalf("%q: %d fields", l, len(f))
		}
		if f[1] == "RUNNING" && f[2] != "0:09" {
			t.Errorf("%q: time %q", l, f[2])
		}
	}
}

func TestToolsParseSacct(t *testing.T) {
	recs := FilterAcct(accounting(), AcctFilter{Now: at("01:27:45")})
	out, err := FormatSacct(recs, SacctOptions{Parsable2: true, Format: "JobID,JobName,State,ExitCode,Elapsed,Start,End,NodeList,AllocTRES,MaxRSS"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := strings.Split(lines[0], "|")
	byID := map[string]map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Split(l, "|")
		if len(f) != len(header) {
			t.Fatalf("%q: %d fields, want %d", l, len(f), len(header))
		}
		m := map[string]string{}
		for i, h := range header {
			m[h] = f[i]
		}
		byID[m["JobID"]] = m
	}
	check := func(id, field, want string) {
		t.Helper()
		if got := byID[id][field]; got != want {
			t.Errorf("%s %s = %q, want %q", id, field, got, want)
		}
	}
	check("3", "State", "TIMEOUT")
	check("3.batch", "ExitCode", "0:15")
	check("4", "ExitCode", "3:0")
	check("20", "State", "CANCELLED by 0")
	check("20", "Start", "None")
	check("19", "AllocTRES", "billing=2,cpu=2,gres/gpu=2,mem=4G,node=1")
	check("10_3", "Elapsed", "00:00:20")
	check("21", "NodeList", "None assigned")
	check("1", "MaxRSS", "")
	// Timestamps are what tools parse back with a fixed layout.
	if _, err := time.Parse("2006-01-02T15:04:05", byID["13"]["End"]); err != nil {
		t.Error(err)
	}
	// Elapsed parses back as Slurm's own duration.
	if d, err := ParseDuration(byID["3"]["Elapsed"]); err != nil || d != 82*time.Second {
		t.Errorf("Elapsed %q: %v %v", byID["3"]["Elapsed"], d, err)
	}

	// The fixed-width default splits on whitespace, State of a cancelled
	// job cut to "CANCELLED+" as in Slurm.
	out, _ = FormatSacct(recs, SacctOptions{})
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[2:] {
		f := strings.Fields(l)
		if strings.HasSuffix(f[0], ".batch") || strings.HasSuffix(f[0], ".0") {
			if len(f) != 6 { // steps have no partition
				t.Errorf("step %q: %d fields", l, len(f))
			}
		} else if len(f) != 7 {
			t.Errorf("job %q: %d fields", l, len(f))
		}
	}
}
