package api

import "time"

// Job steps (srun inside an allocation): the server relays a step from
// srun to the step hosts of the run's nodes (`berth step-host`), their
// output, signals and exit statuses back and forth, and records each step
// (sacct's JOBID.STEPID). Output flows with acknowledgements: a step host
// keeps what srun has not read yet, so a restart of the server loses
// nothing; an attached task (srun --pty, or standard input) has its own
// stream (AttachPath).

// StepRequest starts a step on some node ranks of an active run.
type StepRequest struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Name is the step's name (srun -J; default the command's base name).
	Name string `json:"name,omitempty"`
	// Nodes are the step's node ranks in the step's order (its node k
	// runs the k-th share of the tasks); empty: all the run's nodes.
	Nodes []int `json:"nodes,omitempty"`
	// Ranks are the nodes the relay dispatches to; empty: all of Nodes
	// but Here, the nodes whose tasks srun runs itself (it reports their
	// exits).
	Ranks  []int `json:"ranks,omitempty"`
	Here   []int `json:"here,omitempty"`
	NTasks int   `json:"ntasks,omitempty"`
	// Attach: srun forwards its input over an attach stream per node, to
	// every task (Slurm's --input=all); with PTY, task 0 runs on a
	// pseudo-terminal over its node's stream (input, output, the
	// terminal's size, the exit) and takes the input alone. PTY implies
	// Attach.
	PTY    bool `json:"pty,omitempty"`
	Attach bool `json:"attach,omitempty"`
	Rows   int  `json:"rows,omitempty"`
	Cols   int  `json:"cols,omitempty"`
}

// StepCreated is the ID of a new step (per run, from 0).
type StepCreated struct {
	ID int `json:"id"`
}

// StepAssignment is a step a step host is to run.
type StepAssignment struct {
	ID     int      `json:"id"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	Nodes  []int    `json:"nodes"`
	Ranks  []int    `json:"ranks"`
	NTasks int      `json:"ntasks"`
	PTY    bool     `json:"pty,omitempty"`
	Attach bool     `json:"attach,omitempty"`
	Rows   int      `json:"rows,omitempty"`
	Cols   int      `json:"cols,omitempty"`
}

// StepSignal is a signal srun forwards to a step's tasks; Seq orders them
// within the run.
type StepSignal struct {
	Seq    int64 `json:"seq"`
	Step   int   `json:"step"`
	Signal int   `json:"signal"`
}

// StepWork is what a step host gets from its poll: the steps after the
// one it asked from, and the signals after the sequence it asked from.
type StepWork struct {
	Steps   []StepAssignment `json:"steps,omitempty"`
	Signals []StepSignal     `json:"signals,omitempty"`
}

// StepSignalRequest asks for a signal to a step's tasks.
type StepSignalRequest struct {
	Signal int `json:"signal"`
}

// StepAck answers a step host's output: how far the server holds the
// stream (Have, -1: it knows nothing, send from the oldest byte you
// kept) and how far srun has read it (Read: what the host may forget).
type StepAck struct {
	Have int64 `json:"have"`
	Read int64 `json:"read"`
}

// StepExit is how a step ended on one rank, and the total output it
// wrote (so that srun takes the exit only once it has all of it).
type StepExit struct {
	Code int   `json:"code"`
	Out  int64 `json:"out"`
	Err  int64 `json:"err"`
}

// StepRankOutput is one rank's new output of a step (from offsets) and,
// once it has ended and all its output is through, its exit status.
type StepRankOutput struct {
	Rank    int    `json:"rank"`
	Data    []byte `json:"data,omitempty"`
	Next    int64  `json:"next"` // the stdout offset to ask from next
	Err     []byte `json:"err,omitempty"`
	ErrNext int64  `json:"err_next"`
	Exited  bool   `json:"exited"`
	Code    int    `json:"code"`
}

// StepStatus is a step's output and exits, per rank, and whether it was
// cancelled (scancel JOB.STEP: srun stops its own tasks too).
type StepStatus struct {
	ID        int              `json:"id"`
	Ranks     []StepRankOutput `json:"ranks"`
	Cancelled bool             `json:"cancelled,omitempty"`
}

// Step is a step as sacct lists it.
type Step struct {
	RunID      int64     `json:"run_id"`
	ID         int       `json:"id"`
	Name       string    `json:"name"`
	Argv       []string  `json:"argv"`
	NTasks     int       `json:"ntasks"`
	NodeList   string    `json:"nodelist"`
	Nodes      int       `json:"nodes"`
	PTY        bool      `json:"pty,omitempty"`
	Status     string    `json:"status"` // running, done, failed, stopped
	ExitCode   *int      `json:"exit_code,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// Frames of an attach stream (GET …/steps/{id}/attach, upgraded to
// "berth-attach"): a type byte, a big-endian uint32 length, the payload.
const (
	FrameStdin  byte = 'i' // to the task: input
	FrameEOF    byte = 'I' // to the task: end of input
	FrameResize byte = 'w' // to the task: rows, cols as two big-endian uint16
	FrameStdout byte = 'o' // from the task
	FrameStderr byte = 'e' // from the task
	FrameExit   byte = 'x' // from the task: its exit status, big-endian int32
)

// AttachProtocol is the Upgrade token of an attach stream.
const AttachProtocol = "berth-attach"
