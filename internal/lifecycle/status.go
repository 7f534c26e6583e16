package lifecycle

// Status is a run's or a job's state, in dstack's vocabulary.
type Status string

// The states a run or a job goes through. Submitted, provisioning, pulling,
// running and terminating are active; the others are final.
const (
	StatusSubmitted    Status = "submitted"
	StatusProvisioning Status = "provisioning"
	StatusPulling      Status = "pulling"
	StatusRunning      Status = "running"
	StatusTerminating  Status = "terminating"
	StatusDone         Status = "done"
	StatusFailed       Status = "failed"
	StatusTerminated   Status = "terminated"
	StatusAborted      Status = "aborted"
	// StatusScheduled is a schedule's own run: it submits a run at each
	// tick of its cron expressions until stopped.
	StatusScheduled Status = "scheduled"
)

// Statuses lists every status, active ones first (for tables and tests).
var Statuses = []Status{StatusSubmitted, StatusProvisioning, StatusPulling, StatusRunning, StatusTerminating,
	StatusDone, StatusFailed, StatusTerminated, StatusAborted, StatusScheduled}

// Finished reports whether s is a final state.
func (s Status) Finished() bool {
	switch s {
	case StatusDone, StatusFailed, StatusTerminated, StatusAborted:
		return true
	}
	return false
}

// Placed reports whether a job in state s holds a node: it was sent to an
// agent and has not ended.
func (s Status) Placed() bool {
	switch s {
	case StatusProvisioning, StatusPulling, StatusRunning, StatusTerminating:
		return true
	}
	return false
}

// rank orders final states by how bad an end they are: a run's final state
// is its worst job's.
func (s Status) rank() int {
	switch s {
	case StatusTerminated:
		return 1
	case StatusFailed:
		return 2
	case StatusAborted:
		return 3
	}
	return 0
}
