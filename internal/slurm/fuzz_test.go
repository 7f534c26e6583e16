package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func FuzzParseArray(f *testing.F) {
	for _, s := range []string{"1-100%10", "0-15:4", "1,3,5-7", "[1-3]", "5-1", "%5", "1-5:0", "abc", "1000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseArray(s, 0)
		if err != nil {
			if !errors.Is(err, ErrArraySpec) {
				t.Fatalf("ParseArray(%q) error %v", s, err)
			}
			return
		}
		if len(spec.Indices) == 0 {
			t.Fatalf("ParseArray(%q) accepted no index", s)
		}
		for i, v := range spec.Indices {
			if v < 0 || v >= DefaultMaxArraySize || (i > 0 && v <= spec.Indices[i-1]) {
				t.Fatalf("ParseArray(%q) indices %v", s, spec.Indices)
			}
		}
		// What squeue prints for the tasks names the same tasks (when not cut).
		str := FormatArrayTasks(spec.Indices, 0)
		if strings.HasSuffix(str, "...") || strings.Contains(str, ":") {
			return
		}
		back, err := ParseArray(str, 0)
		if err != nil || len(back.Indices) != len(spec.Indices) {
			t.Fatalf("FormatArrayTasks(%v) = %q does not parse back: %v", spec.Indices, str, err)
		}
	})
}

func FuzzParseDependency(f *testing.F) {
	for _, s := range []string{"afterok:1:2,afterany:3", "afterok:1?afternotok:2", "after:5+10", "singleton", "afterok:7_*", "12,13", "afterok:4(failed)", "foo:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDependency(s)
		if err != nil {
			if !errors.Is(err, ErrDependency) {
				t.Fatalf("ParseDependency(%q) error %v", s, err)
			}
			return
		}
		if d == nil {
			return
		}
		again, err := ParseDependency(d.Spec())
		if err != nil || again.Spec() != d.Spec() {
			t.Fatalf("Spec %q of %q does not parse back: %v", d.Spec(), s, err)
		}
		_ = d.String()
	})
}

func FuzzSbatch(f *testing.F) {
	f.Add("-N 2 -t 1-00:00 --gres=gpu:2 job.sh", "#!/bin/sh\n#SBATCH -J x --array=1-3\ntrue\n")
	f.Add("--wrap true -o out-%j", "")
	f.Add("-p a : -p b job.sh", "#!/bin/sh\n#SBATCH hetjob\n#SBATCH -n 2\n")
	f.Add("--mem-per=1 --dep=afterok:1", "#!/bin/sh\n#SBATCH --signal=B:USR1@90 'a b\n")
	f.Fuzz(func(t *testing.T, args, script string) {
		cmd, err := ParseSbatchArgs(strings.Fields(args))
		if err != nil {
			var ce *CommandError
			if !errors.As(err, &ce) || len(ce.Stderr) == 0 {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		job, err := BuildBatchJob(cmd, []byte(script), SubmitContext{Cwd: "/w", Now: time.Unix(1795310769, 0)})
		if err != nil {
			var ce *CommandError
			if !errors.As(err, &ce) || len(ce.Stderr) == 0 || ce.ExitCode == 0 {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if len(job.Components) == 0 {
			t.Fatal("no component")
		}
	})
}
