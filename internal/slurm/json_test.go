package slurm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSinfoJSONGolden(t *testing.T) {
	g := readGolden(t, "sinfo-json.txt")
	assertGolden(t, "sinfo-json.txt", g.stdout, SinfoJSON([]Node{goldenNode()}))
}

func TestSacctJSONGolden(t *testing.T) {
	var recs []AcctRecord
	for _, r := range accounting() {
		if r.JobID == 4 {
			r.WorkDir, r.Priority = "/tmp/research/scratch", 4294901756
			if r.Step == "" {
				r.Extra = map[string]string{"Flags": "CLEAR_SCHEDULING,STARTED_ON_SCHEDULE"}
			} else {
				r.Extra = map[string]string{"SystemCPU": "00:00.001731"}
			}
			recs = append(recs, r)
		}
	}
	g := readGolden(t, "sacct-j-json.txt")
	assertGolden(t, "sacct-j-json.txt", g.stdout, SacctJSON(recs, "local"))
}

// objectKeys returns the keys of each object in the array at doc[key], in
// the order they appear.
func objectKeys(t *testing.T, doc, key string) [][]string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw[key], &items); err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, it := range items {
		dec := json.NewDecoder(bytes.NewReader(it))
		var keys []string
		depth := 0
		expectKey := false
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch v := tok.(type) {
			case json.Delim:
				if v == '{' || v == '[' {
					depth++
				} else {
					depth--
				}
				expectKey = depth == 1 && v != '['
			case string:
				if depth == 1 && expectKey {
					keys = append(keys, v)
					expectKey = false
					continue
				}
			}
			if depth == 1 {
				expectKey = true
			}
		}
		out = append(out, keys)
	}
	return out
}

// squeue --json was captured at another moment than the text outputs, so
// its jobs are built from its own values. Everything but Slurm's internal
// bookkeeping (association ids, job flags) must match, keys in order.
func TestSqueueJSONGolden(t *testing.T) {
	g := readGolden(t, "squeue-json.txt")
	ts := func(u int64) time.Time { return time.Unix(u, 0).UTC() }
	base := func(id uint32, name string) *jobBuilder {
		return aJob(id, name).with(func(j *Job) {
			j.WorkDir, j.StdErr = "/tmp/research/scratch", ""
			j.Submit = ts(1795310767)
		})
	}
	want := map[uint32]Job{
		10: base(10, "wrap").tasks(10, 2, 3, 4, 5).pending(ReasonJobArrayTaskLimit).prio(4294901751).with(func(j *Job) {
			j.Accrue, j.LastSchedEval = ts(1795310769), ts(1795310769)
		}).build(),
		11: base(11, "wrap").task(10, 1, 2).prio(4294901751).with(func(j *Job) {
			j.State, j.Reason, j.Start, j.End = JobRunning, ReasonNone, ts(1795310769), ts(1826846769)
			j.Eligible, j.Accrue, j.LastSchedEval = ts(1795310769), ts(1795310769), ts(1795310769)
			j.NodeList, j.BatchHost = "localhost", "localhost"
		}).build(),
		19: gpuJob().pending(ReasonPriority).with(func(j *Job) {
			j.WorkDir, j.StdErr = "/tmp/research/scratch", ""
			j.Submit, j.Eligible, j.Accrue, j.LastSchedEval = ts(1795310769), ts(1795310769), ts(1795310769), ts(1795310772)
		}).build(),
		16: base(16, "depnever").pending(ReasonDependencyNeverSatisfied).prio(4294901747).dep("afterok:4(failed)").with(func(j *Job) {
			j.Submit, j.LastSchedEval = ts(1795310769), ts(1795310769)
		}).build(),
	}
	var golden struct{ Jobs []map[string]any }
	body := g.stdout
	if err := json.Unmarshal([]byte(body), &golden); err != nil {
		t.Fatal(err)
	}
	goldenKeys := objectKeys(t, body, "jobs")
	compared := 0
	for i, gj := range golden.Jobs {
		id := uint32(gj["job_id"].(float64))
		j, ok := want[id]
		if !ok {
			continue
		}
		compared++
		out := SqueueJSON([]Job{j}, "local")
		var ours struct{ Jobs []map[string]any }
		if err := json.Unmarshal([]byte(out), &ours); err != nil {
			t.Fatalf("job %d: our JSON does not parse: %v", id, err)
		}
		if diff := cmp.Diff(goldenKeys[i], objectKeys(t, out, "jobs")[0]); diff != "" {
			t.Errorf("job %d keys (-slurm +ours):\n%s", id, diff)
		}
		for _, k := range []string{"association_id", "flags"} {
			delete(gj, k)
			delete(ours.Jobs[0], k)
		}
		if diff := cmp.Diff(gj, ours.Jobs[0]); diff != "" {
			t.Errorf("job %d (-slurm +ours):\n%s", id, diff)
		}
	}
	if compared != len(want) {
		t.Errorf("compared %d jobs, want %d", compared, len(want))
	}
	// The document around the jobs is Slurm's, byte for byte.
	empty := SqueueJSON(nil, "local")
	if !strings.HasPrefix(body, strings.TrimSuffix(empty, "[\n  ]\n}")) || !strings.HasSuffix(empty, "\"jobs\": [\n  ]\n}") {
		t.Errorf("document frame:\n%s", empty)
	}
}
