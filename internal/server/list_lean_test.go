package server

import (
	"context"
	"testing"

	"github.com/berth-hq/berth/internal/client"
)

// lean=1 lists each configuration without its commands, environment and
// files, and with what the Slurm listings read (tags, fleets, limits).
func TestListRunsLean(t *testing.T) {
	h := newHarness(t, t.TempDir())
	ctx := context.Background()
	r := submit(t, h, "type: task\nname: lean\nmax_duration: 90s\ntags: {slurm.job_name: lean}\nenv: {BIG: \"x\"}\ncommands: [\"sleep 0\"]\n")
	for _, lean := range []bool{false, true} {
		runs, err := h.c.Runs(ctx, client.ListOptions{All: true, Spec: true, Lean: lean, IDs: []int64{r.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || runs[0].Spec == nil {
			t.Fatalf("lean=%v: listed %+v, want run %d with its configuration", lean, runs, r.ID)
		}
		s := runs[0].Spec
		if got := len(s.Commands) > 0 && len(s.Env) > 0; got == lean {
			t.Errorf("lean=%v: commands %q env %v", lean, s.Commands, s.Env)
		}
		if s.Tags["slurm.job_name"] != "lean" || s.MaxDuration == nil {
			t.Errorf("lean=%v: the configuration lost what the Slurm listings show: tags %v, max_duration %v", lean, s.Tags, s.MaxDuration)
		}
	}
}
