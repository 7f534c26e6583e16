package control

import (
	"fmt"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// The cluster changes only through Step: one input at a time, at the time
// its owner gives, with every name and ID resolved before it is fed (from
// the store, the metrics). What an input changed that must be durable,
// and what to do once it is, the cluster emits as data; its owner's
// obligations, in order, are (raft's Ready and Advance):
//
//  1. serialised with every other input (the server's lock), feed the
//     input (Step) and take what it emitted (Take), queueing the batches
//     for the committer in that order: the queue's order is the order in
//     which the changes were made in memory;
//  2. make each batch durable, many in one transaction;
//  3. then, and only then, perform the batch's effects (messages to
//     agents, wake-ups of log followers and of the scheduler) and answer
//     the caller, which answers its client.
//
// A crash between 1 and 2 loses only changes no one was told of.

// Input is one thing that happens to the cluster.
type Input interface{ isInput() }

type (
	// SubmitInput: a user submits a valid configuration.
	SubmitInput struct {
		UserID, ProjectID int64
		User, Project     string
		Task              *spec.Task
		Body              []byte            // task, encoded as stored
		Ended             map[int64]Outcome // outcomes of the ended runs its dependencies name
		Opts              SubmitOpts
	}
	// StopInput: a user stops a run (abort: at once).
	StopInput struct {
		ID    int64
		Abort bool
		// Cause, when set, is the server's own reason to stop the run
		// (lifecycle.StopUtilization); unset: a user's stop or abort.
		Cause lifecycle.StopCause
	}
	// ControlInput: hold, release, requeue or update a run.
	ControlInput struct {
		ID    int64
		Req   api.ControlRequest
		Admin bool
	}
	// SignalInput: signal a run's running jobs.
	SignalInput struct {
		ID        int64
		Signal    int
		BatchOnly bool
		StepsOnly bool
	}
	// CancelTaskInput: cancel an array's task before it exists.
	CancelTaskInput struct {
		Array int64
		Index int
	}
	// ReportInput: a node's agent reports its jobs' events; peaks are
	// the memory peaks the metrics saw, by job.
	ReportInput struct {
		Node   string
		Events []api.AgentEvent
		Peaks  map[int64]int64
	}
	// RegisterInput: a node's agent registers its resources.
	RegisterInput struct {
		Info api.NodeInfo
		Body []byte // info, encoded as stored
	}
	// ConnectInput, DisconnectInput: a node's stream opens, or the stream
	// of the given epoch ends.
	ConnectInput    struct{ Node string }
	DisconnectInput struct {
		Node  string
		Epoch uint64
	}
	// HealthInput: a node's health report.
	HealthInput struct {
		Node   string
		Health api.NodeHealth
	}
	// DrainInput: an administrator drains a node (drain set) or resumes it.
	DrainInput struct {
		Node  string
		Drain *api.DrainRequest
		By    string
	}
	// RemoveNodeInput: a node leaves the cluster for good (its host was
	// removed from its fleet, its instance terminated, or an administrator
	// deleted it). Refused while jobs are placed there; Online lets the
	// server remove a node whose agent it has just stopped but whose stream
	// has not ended yet.
	RemoveNodeInput struct {
		Node   string
		Why    string
		Online bool
	}
	// NoteInput: the server adds a line to a run's history (a service's
	// reconciler: why a replica is not replaced at once, why the service
	// failed). The run may have ended.
	NoteInput struct {
		RunID         int64
		Type, Message string
	}
	// TickInput: time passed (schedules' ticks, nodes away too long).
	TickInput struct{}
	// ResyncInput: the safety net's timer: the next pass is a full one
	// (the Cycle's Rescan), every hold decided again.
	ResyncInput struct{}
	// RulesInput: a new policy is in force.
	RulesInput struct{ Rules *policy.Policy }
	// PassInput: a scheduling pass begins; PlanInput: its plan, computed
	// off the lock, is applied.
	PassInput struct{}
	PlanInput struct {
		Pass    *Pass
		Plan    sched.Plan
		Reasons []reasonUpdate
	}
)

func (SubmitInput) isInput()     {}
func (StopInput) isInput()       {}
func (ControlInput) isInput()    {}
func (SignalInput) isInput()     {}
func (CancelTaskInput) isInput() {}
func (ReportInput) isInput()     {}
func (RegisterInput) isInput()   {}
func (ConnectInput) isInput()    {}
func (DisconnectInput) isInput() {}
func (HealthInput) isInput()     {}
func (DrainInput) isInput()      {}
func (RemoveNodeInput) isInput() {}
func (TickInput) isInput()       {}
func (NoteInput) isInput()       {}
func (ResyncInput) isInput()     {}
func (RulesInput) isInput()      {}
func (PassInput) isInput()       {}
func (PlanInput) isInput()       {}

// Step applies one input at now and answers it: a submitted run's record
// (store.Run) or, for a key seen before, the run it made (Resubmitted), a report (Report: the acknowledgement and what was refused), a connected
// node's epoch (uint64), a drained node (api.Node), the count of signalled
// jobs (int), when the cluster is next due (time.Time, TickInput), the
// pass to compute (*Pass), or nothing. An input refused with an error
// changed nothing. What it emitted, Take returns.
func (s *Cluster) Step(now time.Time, in Input) (any, error) {
	switch in := in.(type) {
	case SubmitInput:
		return s.onSubmit(now, in)
	case StopInput:
		s.onStop(now, in)
	case ControlInput:
		return nil, s.onControl(now, in)
	case SignalInput:
		return s.onSignal(now, in)
	case CancelTaskInput:
		return nil, s.onCancelTask(now, in)
	case ReportInput:
		return s.onReport(now, in), nil
	case RegisterInput:
		s.onRegister(now, in)
	case ConnectInput:
		return s.onConnect(now, in)
	case DisconnectInput:
		s.onDisconnect(now, in)
	case HealthInput:
		return nil, s.onHealth(in)
	case DrainInput:
		return s.onDrain(now, in)
	case RemoveNodeInput:
		return nil, s.onRemoveNode(in)
	case TickInput:
		return s.onTick(now), nil
	case ServiceFailedInput:
		return s.onServiceFailed(now, in)
	case NoteInput:
		s.emit(&store.Batch{Events: []*store.Event{{RunID: in.RunID, Time: now, Type: in.Type, Message: in.Message}}})
	case ResyncInput:
		s.freed = true
		s.cycle.Rescan()
		s.cycDirty = true
	case RulesInput:
		s.onRules(in)
	case FleetOwnersInput:
		s.onFleetOwners(in) // owners.go
	case PassInput:
		return s.preparePassLocked(now), nil
	case PlanInput:
		s.applyPlanLocked(in.Pass, in.Plan, in.Reasons, now)
	default:
		panic(fmt.Sprintf("control: unknown input %T", in))
	}
	return nil, nil
}

// onRules puts p in force.
func (s *Cluster) onRules(in RulesInput) {
	p := in.Rules
	s.rules.Store(p)
	clear(s.active)
	for _, rs := range s.runs {
		s.countActive(rs, 1)
	}
	s.cycle.Configure(s.cycleConfig(p))
	s.cycDirty = true
	for _, ns := range s.nodes {
		s.syncNode(ns) // its fleet's blocks
	}
	for id, rs := range s.pending {
		s.resolveFleets(rs, *rs.req, rs.r().groups, p)
		s.fresh[id] = rs // queued again with what the policy makes of it
	}
	s.freed = true
}
