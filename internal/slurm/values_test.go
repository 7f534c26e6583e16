package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseArray(t *testing.T) {
	tests := map[string]struct {
		in   string
		want ArraySpec
	}{
		"range throttle": {"1-5%2", ArraySpec{Indices: []int{1, 2, 3, 4, 5}, Throttle: 2}},
		"step":           {"0-15:4", ArraySpec{Indices: []int{0, 4, 8, 12}}},
		"list":           {"1,3,5-7", ArraySpec{Indices: []int{1, 3, 5, 6, 7}}},
		"single":         {"7", ArraySpec{Indices: []int{7}}},
		"brackets":       {"[1-3]", ArraySpec{Indices: []int{1, 2, 3}}},
		"overlap":        {"1-3,2-4", ArraySpec{Indices: []int{1, 2, 3, 4}}},
		"max index":      {"1000", ArraySpec{Indices: []int{1000}}},
		"throttle list":  {"1,2%1", ArraySpec{Indices: []int{1, 2}, Throttle: 1}},
		"step throttle":  {"1-9:2%3", ArraySpec{Indices: []int{1, 3, 5, 7, 9}, Throttle: 3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseArray(tc.in, 0)
			if err != nil {
				t.Fatalf("ParseArray(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseArray(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
	for _, in := range []string{"", "5-1", "abc", "1-5:0", "1-5:-1", "-1", "1001", "0-2000000", "1-3x", "1:2", "1-5:1001", ","} {
		if got, err := ParseArray(in, 0); !errors.Is(err, ErrArraySpec) {
			t.Errorf("ParseArray(%q) = %v, %v; want ErrArraySpec", in, got, err)
		}
	}
	if _, err := ParseArray("5000", 10000); err != nil {
		t.Errorf("ParseArray with MaxArraySize 10000: %v", err)
	}
}

func TestFormatArrayTasks(t *testing.T) {
	long := make([]int, 0, 40)
	for i := 0; i < 80; i += 2 {
		long = append(long, i, i+1) // pairs, no regular step
		i++
	}
	tests := []struct {
		idx      []int
		throttle int
		want     string
	}{
		{[]int{3, 4, 5}, 2, "3-5%2"},
		{[]int{3, 4}, 2, "3-4%2"},
		{[]int{1, 3, 5, 6, 7}, 0, "1,3,5-7"},
		{[]int{0, 4, 8, 12, 16, 20}, 0, "0-20:4"},
		{[]int{0, 4, 8, 12}, 0, "0,4,8,12"}, // too few for the step form
		{[]int{5}, 0, "5"},
	}
	for _, tc := range tests {
		if got := FormatArrayTasks(tc.idx, tc.throttle); got != tc.want {
			t.Errorf("FormatArrayTasks(%v, %d) = %q, want %q", tc.idx, tc.throttle, got, tc.want)
		}
	}
	got := FormatArrayTasks(long, 0)
	if len(got) != 63 || !strings.HasSuffix(got, "...") {
		t.Errorf("long task list = %q (%d chars), want 63 chars ending in ...", got, len(got))
	}
}

func TestParseDependency(t *testing.T) {
	un := DepUnfulfilled
	tests := map[string]struct {
		in      string
		want    *Dependency
		display string
	}{
		"afterok": {"afterok:13", &Dependency{Deps: []Dep{{Type: DepAfterOK, JobID: 13, TaskID: DepWholeJob, State: un}}}, "afterok:13(unfulfilled)"},
		"all": {"afterok:1:2,afterany:3", &Dependency{Deps: []Dep{
			{Type: DepAfterOK, JobID: 1, TaskID: DepWholeJob, State: un},
			{Type: DepAfterOK, JobID: 2, TaskID: DepWholeJob, State: un},
			{Type: DepAfterAny, JobID: 3, TaskID: DepWholeJob, State: un},
		}}, "afterok:1(unfulfilled),afterok:2(unfulfilled),afterany:3(unfulfilled)"},
		"any": {"afterok:1?afternotok:2", &Dependency{Any: true, Deps: []Dep{
			{Type: DepAfterOK, JobID: 1, TaskID: DepWholeJob, State: un},
			{Type: DepAfterNotOK, JobID: 2, TaskID: DepWholeJob, State: un},
		}}, "afterok:1(unfulfilled)?afternotok:2(unfulfilled)"},
		"after delay": {"after:5+10", &Dependency{Deps: []Dep{{Type: DepAfter, JobID: 5, TaskID: DepWholeJob, Delay: 10 * time.Minute, State: un}}}, "after:5+10(unfulfilled)"},
		"singleton":   {"singleton", &Dependency{Deps: []Dep{{Type: DepSingleton, TaskID: DepWholeJob, State: un}}}, "singleton(unfulfilled)"},
		"array task":  {"afterok:7_3", &Dependency{Deps: []Dep{{Type: DepAfterOK, JobID: 7, TaskID: 3, State: un}}}, "afterok:7_3(unfulfilled)"},
		"all tasks":   {"aftercorr:7_*", &Dependency{Deps: []Dep{{Type: DepAfterCorr, JobID: 7, TaskID: DepAllTasks, State: un}}}, "aftercorr:7_*(unfulfilled)"},
		"old format": {"12,13", &Dependency{Deps: []Dep{
			{Type: DepAfterAny, JobID: 12, TaskID: DepWholeJob, State: un},
			{Type: DepAfterAny, JobID: 13, TaskID: DepWholeJob, State: un},
		}}, "afterany:12(unfulfilled),afterany:13(unfulfilled)"},
		"printed state": {"afterok:4(failed)", &Dependency{Deps: []Dep{{Type: DepAfterOK, JobID: 4, TaskID: DepWholeJob, State: DepFailed}}}, "afterok:4(failed)"},
		"case":          {"AfterOK:4", &Dependency{Deps: []Dep{{Type: DepAfterOK, JobID: 4, TaskID: DepWholeJob, State: un}}}, "afterok:4(unfulfilled)"},
		"singleton and": {"singleton,afterok:2", &Dependency{Deps: []Dep{
			{Type: DepSingleton, TaskID: DepWholeJob, State: un},
			{Type: DepAfterOK, JobID: 2, TaskID: DepWholeJob, State: un},
		}}, "singleton(unfulfilled),afterok:2(unfulfilled)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDependency(tc.in)
			if err != nil {
				t.Fatalf("ParseDependency(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseDependency(%q) (-want +got):\n%s", tc.in, diff)
			}
			if s := got.String(); s != tc.display {
				t.Errorf("String() = %q, want %q", s, tc.display)
			}
			again, err := ParseDependency(got.Spec())
			if err != nil || again.Spec() != got.Spec() || len(again.Deps) != len(got.Deps) {
				t.Errorf("Spec %q does not parse back: %v", got.Spec(), err)
			}
		})
	}
	for _, in := range []string{"foo:1", "afterok", "afterok:", "afterok:0", "afterok:x", "after:5+0", "afterok:1;2", "singletonx", "afterok:1,", "1x", "afterok:1(fulfilled"} {
		if got, err := ParseDependency(in); !errors.Is(err, ErrDependency) {
			t.Errorf("ParseDependency(%q) = %v, %v; want ErrDependency", in, got, err)
		}
	}
	if d, err := ParseDependency(""); d != nil || err != nil {
		t.Errorf(`ParseDependency("") = %v, %v`, d, err)
	}
	// Fulfilled conditions are not shown.
	d := &Dependency{Deps: []Dep{{Type: DepAfterOK, JobID: 1, TaskID: DepWholeJob, State: DepFulfilled}}}
	if s := d.String(); s != "(null)" {
		t.Errorf("fulfilled dependency shows %q", s)
	}
}

func TestParseSignal(t *testing.T) {
	tests := map[string]SignalSpec{
		"USR1":        {Signal: 10, Before: 60 * time.Second},
		"B:USR1@90":   {Signal: 10, Before: 90 * time.Second, BatchOnly: true},
		"SIGTERM@0":   {Signal: 15},
		"R:10@120":    {Signal: 10, Before: 120 * time.Second, Reservation: true},
		"BR:usr2":     {Signal: 12, Before: 60 * time.Second, BatchOnly: true, Reservation: true},
		"RB:KILL@600": {Signal: 9, Before: 600 * time.Second, BatchOnly: true, Reservation: true},
		"B:2":         {Signal: 2, Before: 60 * time.Second, BatchOnly: true},
	}
	for in, want := range tests {
		got, err := ParseSignal(in)
		if err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"FOO", "USR1@abc", "", "0", "USR1@-1", "USR1@70000", "10x"} {
		if _, err := ParseSignal(in); !errors.Is(err, ErrSignalSpec) {
			t.Errorf("ParseSignal(%q) = %v, want ErrSignalSpec", in, err)
		}
	}
	if s := (SignalSpec{Signal: 10, Before: 90 * time.Second, BatchOnly: true}).String(); s != "B:USR1@90" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseExport(t *testing.T) {
	tests := map[string]Export{
		"ALL":              {Mode: ExportAll},
		"NONE":             {Mode: ExportNone},
		"NIL":              {Mode: ExportNil},
		"ALL,FOO=bar,BAZ":  {Mode: ExportAll, Vars: []EnvVar{{Name: "FOO", Value: "bar", HasValue: true}, {Name: "BAZ"}}},
		"FOO,BAR=1":        {Mode: ExportNone, Vars: []EnvVar{{Name: "FOO"}, {Name: "BAR", Value: "1", HasValue: true}}},
		"A=1,2,ALL":        {Mode: ExportAll, Vars: []EnvVar{{Name: "A", Value: "1,2", HasValue: true}}},
		`A="x,y",B=2`:      {Mode: ExportNone, Vars: []EnvVar{{Name: "A", Value: "x,y", HasValue: true}, {Name: "B", Value: "2", HasValue: true}}},
		"EDITOR=emacs,ALL": {Mode: ExportAll, Vars: []EnvVar{{Name: "EDITOR", Value: "emacs", HasValue: true}}},
	}
	for in, want := range tests {
		if got := ParseExport(in); !cmp.Equal(want, got) {
			t.Errorf("ParseExport(%q) (-want +got):\n%s", in, cmp.Diff(want, got))
		}
	}
	env := []string{"HOME=/root", "PATH=/bin", "SLURM_CONF=/etc/slurm.conf", "FOO=1"}
	if got, want := ParseExport("NONE").Environment(env), []string{"SLURM_CONF=/etc/slurm.conf"}; !cmp.Equal(want, got) {
		t.Errorf("NONE environment = %q", got)
	}
	if got, want := ParseExport("FOO,BAR=2").Environment(env), []string{"BAR=2", "FOO=1", "SLURM_CONF=/etc/slurm.conf"}; !cmp.Equal(want, got) {
		t.Errorf("list environment = %q", got)
	}
	if got := ParseExport("ALL,FOO=9").Environment(env); !cmp.Equal([]string{"FOO=9", "HOME=/root", "PATH=/bin", "SLURM_CONF=/etc/slurm.conf"}, got) {
		t.Errorf("ALL environment = %q", got)
	}
}

func TestParseGRES(t *testing.T) {
	tests := map[string][]GRES{
		"gpu:2":               {{Name: "gpu", Count: 2}},
		"gpu:a100:2":          {{Name: "gpu", Type: "a100", Count: 2}},
		"gpu":                 {{Name: "gpu", Count: 1}},
		"gpu:a100":            {{Name: "gpu", Type: "a100", Count: 1}},
		"gpu:2,nic:1":         {{Name: "gpu", Count: 2}, {Name: "nic", Count: 1}},
		"gres:gpu:2":          {{Name: "gpu", Count: 2}},
		"gpu:0":               {{Name: "gpu", Count: 0}},
		"bandwidth:lustre:4k": {{Name: "bandwidth", Type: "lustre", Count: 4096}},
		"none":                nil,
		"gpu:3090:2":          {{Name: "gpu", Type: "3090", Count: 2}},
	}
	for in, want := range tests {
		got, err := ParseGRES(in)
		if err != nil || !cmp.Equal(want, got) {
			t.Errorf("ParseGRES(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "gpu:a100:2:3", "gpu:2(S:0)", ":2", "gpu:-1", "2"} {
		if _, err := ParseGRES(in); !errors.Is(err, ErrGRES) {
			t.Errorf("ParseGRES(%q) = %v, want ErrGRES", in, err)
		}
	}
	gpus := map[string][]GRES{
		"2":             {{Name: "gpu", Count: 2}},
		"a100:2":        {{Name: "gpu", Type: "a100", Count: 2}},
		"gpu:a100:2":    {{Name: "gpu", Type: "a100", Count: 2}},
		"a100:1,v100:2": {{Name: "gpu", Type: "a100", Count: 1}, {Name: "gpu", Type: "v100", Count: 2}},
	}
	for in, want := range gpus {
		got, err := ParseGPUs(in)
		if err != nil || !cmp.Equal(want, got) {
			t.Errorf("ParseGPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "a100:", "2:a100"} {
		if _, err := ParseGPUs(in); !errors.Is(err, ErrGRES) {
			t.Errorf("ParseGPUs(%q) = %v, want ErrGRES", in, err)
		}
	}
	if s := TRESString([]GRES{{Name: "gpu", Type: "a100", Count: 2}, {Name: "nic", Count: 1}}); s != "gres:gpu:a100:2,gres:nic:1" {
		t.Errorf("TRESString = %q", s)
	}
}

func TestExpandFilename(t *testing.T) {
	job := FilenameContext{JobID: 42, ArrayTaskID: NoArrayTask, StepID: -1, JobName: "train", User: "alice", Node: "gpu07", WorkDir: "/home/alice"}
	task := FilenameContext{JobID: 23, ArrayJobID: 10, ArrayTaskID: 3, StepID: -1, JobName: "sweep", User: "bob", Node: "n1", WorkDir: "/w/"}
	tests := []struct {
		pattern string
		c       FilenameContext
		want    string
	}{
		{"", job, "/home/alice/slurm-42.out"},
		{"", task, "/w/slurm-10_3.out"},
		{"out-%j.txt", job, "/home/alice/out-42.txt"},
		{"/tmp/%x-%u-%N.log", job, "/tmp/train-alice-gpu07.log"},
		{"%A_%a", task, "/w/10_3"},
		{"%A", job, "/home/alice/42"},
		{"%a", job, "/home/alice/4294967294"},
		{"%5j", job, "/home/alice/00042"},
		{"%12j", job, "/home/alice/0000000042"},
		{"%3a-%j", task, "/w/003-23"},
		{"100%%", job, "/home/alice/100%"},
		{"%s.%n.%t", job, "/home/alice/batch.0.0"},
		{"%J", job, "/home/alice/42"},
		{"%z-%j", job, "/home/alice/%z-42"},
		{`out-\%j`, job, "/home/aliceout-%j"},
		{`/tmp/a\\b-%j`, job, `/tmp/a\b-%j`},
		{"trail%", job, "/home/alice/trail%"},
		{"x%7", job, "/home/alice/x7"},
	}
	for _, tc := range tests {
		if got := ExpandFilename(tc.pattern, tc.c); got != tc.want {
			t.Errorf("ExpandFilename(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}
