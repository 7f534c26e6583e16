package server

import "github.com/berth-hq/berth/internal/api"

// leanSpecs drops from a listing's configurations what the Slurm
// listings never show and what makes them long: the commands (a batch
// script), the environment (sbatch --export=ALL copies the caller's) and
// the files. lean=1 asks for it.
func leanSpecs(runs []*api.Run) {
	for _, r := range runs {
		if r.Spec != nil {
			r.Spec.Commands, r.Spec.Env, r.Spec.Files = nil, nil, nil
		}
	}
}
