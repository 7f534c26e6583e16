package sim

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const sec = time.Second

// swfLine builds one 18-field SWF job line; the fields not given are -1.
func swfLine(fields map[int]string) string {
	f := make([]string, swfFields)
	for i := range f {
		f[i] = "-1"
	}
	for k, v := range fields {
		f[k-1] = v
	}
	return strings.Join(f, " ")
}

func TestParseSWF(t *testing.T) {
	tests := map[string]struct {
		in       string
		wantMax  int
		wantJobs []Job
	}{
		"MaxProcs wins over MaxNodes, comments and blank lines are skipped": {
			in: "; Version: 2.2\n; MaxNodes: 64\n;   MaxProcs:   128  \n; Note: anything: with colons\n\n" +
				"  1   0  5  100  4 -1 -1  4  200 -1 1 7 1 -1 -1 -1 -1 -1\n" +
				";\n" +
				"\t2\t10\t0\t50\t2\t-1\t-1\t-1\t-1\t-1\t0\t8\t1\t-1\t-1\t-1\t-1\t-1\n",
			wantMax: 128,
			wantJobs: []Job{
				{ID: 1, User: "7", Submit: 0, Run: 100 * sec, Procs: 4, Estimate: 200 * sec},
				{ID: 2, User: "8", Submit: 10 * sec, Run: 50 * sec, Procs: 2, Estimate: 50 * sec},
			},
		},
		"MaxNodes when there is no MaxProcs": {
			in:       "; MaxNodes: 100\n; MaxProcs: -1\n" + swfLine(map[int]string{1: "3", 2: "5", 4: "9", 8: "1"}) + "\n",
			wantMax:  100,
			wantJobs: []Job{{ID: 3, Submit: 5 * sec, Run: 9 * sec, Procs: 1, Estimate: 9 * sec}},
		},
		"no header: machine size unknown": {
			in:       swfLine(map[int]string{1: "1", 2: "0", 4: "1", 5: "1"}),
			wantJobs: []Job{{ID: 1, Run: 1 * sec, Procs: 1, Estimate: 1 * sec}},
		},
		"processors: requested (8) if positive, else allocated (5)": {
			in: strings.Join([]string{
				swfLine(map[int]string{1: "1", 2: "0", 4: "10", 5: "16", 8: "8"}),
				swfLine(map[int]string{1: "2", 2: "0", 4: "10", 5: "16", 8: "0"}),
				swfLine(map[int]string{1: "3", 2: "0", 4: "10", 5: "16"}),
				swfLine(map[int]string{1: "4", 2: "0", 4: "10"}),
			}, "\n"),
			wantJobs: []Job{
				{ID: 1, Run: 10 * sec, Procs: 8, Estimate: 10 * sec},
				{ID: 2, Run: 10 * sec, Procs: 16, Estimate: 10 * sec},
				{ID: 3, Run: 10 * sec, Procs: 16, Estimate: 10 * sec},
				{ID: 4, Run: 10 * sec, Procs: -1, Estimate: 10 * sec},
			},
		},
		"estimate: max(requested time (9) if positive else run, run)": {
			in: strings.Join([]string{
				swfLine(map[int]string{1: "1", 2: "0", 4: "10", 8: "1", 9: "60"}),
				swfLine(map[int]string{1: "2", 2: "0", 4: "100", 8: "1", 9: "60"}),
				swfLine(map[int]string{1: "3", 2: "0", 4: "100", 8: "1", 9: "0"}),
				swfLine(map[int]string{1: "4", 2: "0", 4: "100", 8: "1"}),
			}, "\n"),
			wantJobs: []Job{
				{ID: 1, Run: 10 * sec, Procs: 1, Estimate: 60 * sec},
				{ID: 2, Run: 100 * sec, Procs: 1, Estimate: 100 * sec},
				{ID: 3, Run: 100 * sec, Procs: 1, Estimate: 100 * sec},
				{ID: 4, Run: 100 * sec, Procs: 1, Estimate: 100 * sec},
			},
		},
		"recorded wait and status are ignored; fractional fields are accepted": {
			in:       swfLine(map[int]string{1: "9", 2: "100", 3: "99999", 4: "5", 6: "3.75", 7: "12.5", 8: "2", 11: "5", 12: "3"}),
			wantJobs: []Job{{ID: 9, User: "3", Submit: 100 * sec, Run: 5 * sec, Procs: 2, Estimate: 5 * sec}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseSWF(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got.MaxProcs != tc.wantMax {
				t.Errorf("MaxProcs = %d, want %d", got.MaxProcs, tc.wantMax)
			}
			if diff := cmp.Diff(tc.wantJobs, got.Jobs); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSWFErrors(t *testing.T) {
	good := swfLine(map[int]string{1: "1", 2: "0", 4: "10", 8: "1"})
	tests := map[string]struct {
		in        string
		wantLine  int
		wantField int
		wantMsg   string
	}{
		"too few fields": {
			in:       "; MaxProcs: 4\n" + good + "\n2 0 -1 10 1\n",
			wantLine: 3, wantMsg: "5 fields, want 18",
		},
		"too many fields": {
			in:       good + " 7\n",
			wantLine: 1, wantMsg: "19 fields, want 18",
		},
		"not a number": {
			in:       good + "\n\n" + swfLine(map[int]string{1: "2", 2: "0", 4: "ten", 8: "1"}) + "\n",
			wantLine: 3, wantField: 4, wantMsg: `trace:3: field 4 (run time): "ten" is not a number`,
		},
		"duplicate job number": {
			in:       good + "\n" + good + "\n",
			wantLine: 2, wantField: 1, wantMsg: "job 1 already on line 1",
		},
		"negative submit time": {
			in:       swfLine(map[int]string{1: "1", 2: "-1", 4: "10", 8: "1"}),
			wantLine: 1, wantField: 2, wantMsg: "negative submit time",
		},
		"time out of range": {
			in:       swfLine(map[int]string{1: "1", 2: "0", 4: "9223372036854775807", 8: "1"}),
			wantLine: 1, wantField: 4, wantMsg: "out of range",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSWF(strings.NewReader(tc.in))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want one wrapping ErrMalformed", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %T, want *ParseError", err)
			}
			if pe.Line != tc.wantLine || pe.Field != tc.wantField {
				t.Errorf("line %d field %d, want line %d field %d (%v)", pe.Line, pe.Field, tc.wantLine, tc.wantField, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
		})
	}
}

// OpenSWF reads gzipped and plain files alike, whatever their names, and its
// errors name the file and line.
func TestOpenSWF(t *testing.T) {
	text := "; MaxProcs: 8\n" + swfLine(map[int]string{1: "1", 2: "0", 4: "10", 8: "2"}) + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	dir := t.TempDir()
	files := map[string][]byte{"plain.swf": []byte(text), "zipped.swf.gz": gz.Bytes(), "zipped-no-suffix.swf": gz.Bytes()}
	want := Trace{MaxProcs: 8, Jobs: []Job{{ID: 1, Run: 10 * sec, Procs: 2, Estimate: 10 * sec}}}
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := OpenSWF(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("trace (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("errors name the file and line", func(t *testing.T) {
		path := filepath.Join(dir, "bad.swf")
		os.WriteFile(path, []byte(text+"1 2 3\n"), 0o644)
		_, err := OpenSWF(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+":3: ") {
			t.Errorf("err = %v, want it to start with %q", err, path+":3: ")
		}
	})
	t.Run("a missing file", func(t *testing.T) {
		_, err := OpenSWF(filepath.Join(dir, "none.swf"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want os.ErrNotExist", err)
		}
	})
}

func TestKeep(t *testing.T) {
	job := func(id int64, submit, run, procs int) Job {
		return Job{ID: id, Submit: time.Duration(submit) * sec, Run: time.Duration(run) * sec, Procs: procs, Estimate: time.Duration(max(run, 1)) * sec}
	}
	jobs := []Job{
		job(1, 5, 10, 4),   // kept
		job(2, 0, 0, 1),    // run <= 0
		job(3, 0, -1, 1),   // run <= 0 (unknown), whatever its processors
		job(4, 0, -1, -1),  // run <= 0 first
		job(5, 0, 10, 0),   // processors <= 0
		job(6, 0, 10, -1),  // processors <= 0
		job(7, 0, 10, 5),   // processors > P
		job(8, 5, 10, 4),   // kept, ties with 1 by submit: after it by ID
		job(0, 2, 1, 1),    // kept, earlier
		job(10, 5, 10, 3),  // kept
		job(9, 5, 10, 1),   // kept, before 10 by ID
		job(11, 9, 10, 40), // processors > P
	}
	kept, drops := Keep(jobs, 4)
	var ids []int64
	for _, j := range kept {
		ids = append(ids, j.ID)
	}
	if diff := cmp.Diff([]int64{0, 1, 8, 9, 10}, ids); diff != "" {
		t.Errorf("kept, in arrival order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Drops{DropNoRun: 3, DropNoProcs: 2, DropTooLarge: 2}, drops); diff != "" {
		t.Errorf("drops (-want +got):\n%s", diff)
	}
	if drops.Total() != 7 {
		t.Errorf("Total = %d, want 7", drops.Total())
	}
}

func FuzzParseSWF(f *testing.F) {
	f.Add([]byte("; MaxProcs: 4\n" + swfLine(map[int]string{1: "1", 2: "0", 4: "10", 8: "1"}) + "\n"))
	f.Add([]byte("1 0 -1 10 1 -1 -1 -1 -1 -1 -1 1 1 -1 -1 -1 -1 -1\n;x\n2 3"))
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ParseSWF(bytes.NewReader(in))
		if err != nil {
			return
		}
		if tr.MaxProcs < 0 {
			t.Fatalf("negative MaxProcs %d", tr.MaxProcs)
		}
		for _, j := range tr.Jobs {
			if j.Submit < 0 || j.Estimate < j.Run {
				t.Fatalf("job %+v: negative submit or estimate below run", j)
			}
		}
		// Whatever parses, Keep and Run must handle without error.
		p := max(tr.MaxProcs, 1)
		kept, _ := Keep(tr.Jobs, p)
		if _, err := Run(kept, Config{Procs: p}); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

func TestRepeat(t *testing.T) {
	jobs := []Job{aJob(1, 10, 1, 5), aJob(3, 15, 2, 5), aJob(2, 20, 1, 5)}
	SortByArrival(jobs)
	got := Repeat(jobs, 2)
	// The span is 20 - 10 + 1 = 11 s; IDs move up by the largest, 3.
	want := []Job{aJob(1, 10, 1, 5), aJob(3, 15, 2, 5), aJob(2, 20, 1, 5), aJob(4, 21, 1, 5), aJob(6, 26, 2, 5), aJob(5, 31, 1, 5)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Repeat (-want +got):\n%s", diff)
	}
	if got := Repeat(jobs, 1); len(got) != 3 {
		t.Errorf("Repeat once: %d jobs, want the 3", len(got))
	}
}
