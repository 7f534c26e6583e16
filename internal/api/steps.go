package api

// Job steps (srun inside a multi-node allocation): the server relays a
// step from srun to the step hosts of the run's other nodes and their
// output and exit statuses back. Steps live in the server's memory only.

// StepRequest starts a step on some node ranks of an active run.
type StepRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Ranks are the node ranks to run on (empty: all the run's nodes).
	Ranks []int `json:"ranks,omitempty"`
}

// StepCreated is the ID of a new step (per run, from 0) and the relay's
// epoch (it changes when the server restarts and forgets its steps).
type StepCreated struct {
	ID    int    `json:"id"`
	Epoch string `json:"epoch"`
}

// StepAssignment is a step a step host is to run.
type StepAssignment struct {
	ID    int      `json:"id"`
	Epoch string   `json:"epoch"`
	Argv  []string `json:"argv"`
	Env   []string `json:"env,omitempty"`
	Dir   string   `json:"dir,omitempty"`
	Ranks []int    `json:"ranks"`
}

// StepExit is how a step ended on one rank.
type StepExit struct {
	Code int `json:"code"`
}

// StepRankOutput is one rank's new output of a step (from an offset) and,
// once it has ended, its exit status.
type StepRankOutput struct {
	Rank   int    `json:"rank"`
	Data   []byte `json:"data,omitempty"`
	Next   int64  `json:"next"` // the offset to ask from next
	Exited bool   `json:"exited"`
	Code   int    `json:"code"`
}

// StepStatus is a step's output and exits, per rank.
type StepStatus struct {
	ID    int              `json:"id"`
	Ranks []StepRankOutput `json:"ranks"`
}
