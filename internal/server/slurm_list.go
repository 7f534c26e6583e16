package server

import (
	"encoding/json"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// withSpec adds a run's configuration to its listing (GET /runs?spec=1):
// the Slurm commands show what only the configuration holds (time limit,
// partitions, QOS, the Slurm job name and options kept in its tags) for
// every run at once, without one request per run.
func withSpec(out *api.Run, r *store.Run) *api.Run {
	var t spec.Task
	if json.Unmarshal(r.Spec, &t) == nil {
		out.Spec = &t
	}
	return out
}
