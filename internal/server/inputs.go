package server

import (
	"fmt"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
)

// The cluster changes only through step: one input at a time, at the time
// the server gives, with every name and ID resolved by the server (from
// the store, the metrics) before it is fed. What an input changed that
// must be durable, and what to do once it is, the cluster emits as data;
// the server's obligations, in order, are (raft's Ready and Advance):
//
//  1. under mu, feed the input (step) and take what it emitted
//     (flushLocked): the committer's queue order is the order in which the
//     changes were made in memory;
//  2. the committer makes each batch durable, many in one transaction;
//  3. then, and only then, it performs the batch's effects (messages to
//     agents, wake-ups of log followers and of the scheduler) and answers
//     the caller, which answers its client.
//
// A crash between 1 and 2 loses only changes no one was told of.

// input is one thing that happens to the cluster.
type input interface{ isInput() }

type (
	// submitInput: a user submits a valid configuration.
	submitInput struct {
		userID, projectID int64
		user, project     string
		task              *spec.Task
		body              []byte            // task, encoded as stored
		ended             map[int64]outcome // outcomes of the ended runs its dependencies name
		opts              submitOpts
	}
	// stopInput: a user stops a run (abort: at once).
	stopInput struct {
		id    int64
		abort bool
	}
	// controlInput: hold, release, requeue or update a run.
	controlInput struct {
		id    int64
		req   api.ControlRequest
		admin bool
	}
	// signalInput: signal a run's running jobs.
	signalInput struct {
		id        int64
		signal    int
		batchOnly bool
	}
	// cancelTaskInput: cancel an array's task before it exists.
	cancelTaskInput struct {
		array int64
		index int
	}
	// reportInput: a node's agent reports its jobs' events; peaks are
	// the memory peaks the metrics saw, by job.
	reportInput struct {
		node   string
		events []api.AgentEvent
		peaks  map[int64]int64
	}
	// registerInput: a node's agent registers its resources.
	registerInput struct {
		info api.NodeInfo
		body []byte // info, encoded as stored
	}
	// connectInput, disconnectInput: a node's stream opens, or the stream
	// of the given epoch ends.
	connectInput    struct{ node string }
	disconnectInput struct {
		node  string
		epoch uint64
	}
	// healthInput: a node's health report.
	healthInput struct {
		node   string
		health api.NodeHealth
	}
	// drainInput: an administrator drains a node (drain set) or resumes it.
	drainInput struct {
		node  string
		drain *api.DrainRequest
		by    string
	}
	// tickInput: time passed (schedules' ticks, nodes away too long).
	tickInput struct{}
	// rulesInput: a new policy is in force.
	rulesInput struct{ rules *policy.Policy }
	// passInput: a scheduling pass begins; planInput: its plan, computed
	// off the lock, is applied.
	passInput struct{}
	planInput struct {
		pass    *pass
		plan    sched.Plan
		reasons []reasonUpdate
	}
)

func (submitInput) isInput()     {}
func (stopInput) isInput()       {}
func (controlInput) isInput()    {}
func (signalInput) isInput()     {}
func (cancelTaskInput) isInput() {}
func (reportInput) isInput()     {}
func (registerInput) isInput()   {}
func (connectInput) isInput()    {}
func (disconnectInput) isInput() {}
func (healthInput) isInput()     {}
func (drainInput) isInput()      {}
func (tickInput) isInput()       {}
func (rulesInput) isInput()      {}
func (passInput) isInput()       {}
func (planInput) isInput()       {}

// step applies one input at now and answers it: a submitted run's record
// (store.Run), a report's acknowledgement (*api.AgentAck), a connected
// node's epoch (uint64), a drained node (api.Node), the count of signalled
// jobs (int), when the cluster is next due (time.Time, tickInput), the
// pass to compute (*pass), or nothing. An input refused with an error
// changed nothing.
func (s *cluster) step(now time.Time, in input) (any, error) {
	switch in := in.(type) {
	case submitInput:
		return s.onSubmit(now, in)
	case stopInput:
		s.onStop(now, in)
	case controlInput:
		return nil, s.onControl(now, in)
	case signalInput:
		return s.onSignal(now, in)
	case cancelTaskInput:
		return nil, s.onCancelTask(now, in)
	case reportInput:
		return s.onReport(now, in), nil
	case registerInput:
		s.onRegister(now, in)
	case connectInput:
		return s.onConnect(now, in)
	case disconnectInput:
		s.onDisconnect(now, in)
	case healthInput:
		return nil, s.onHealth(in)
	case drainInput:
		return s.onDrain(now, in)
	case tickInput:
		return s.onTick(now), nil
	case rulesInput:
		s.onRules(in)
	case passInput:
		return s.preparePassLocked(now), nil
	case planInput:
		s.applyPlanLocked(in.pass, in.plan, in.reasons, now)
	default:
		panic(fmt.Sprintf("server: unknown input %T", in))
	}
	return nil, nil
}

// do feeds in to the cluster and answers once what it changed is durable
// and its effects are performed.
func (s *Server) do(in input) (any, error) {
	return s.doWith(func() input { return in })
}

// doWith is do with an input made under the lock, from what the cluster
// holds (read, not changed).
func (s *Server) doWith(make func() input) (any, error) {
	reply, done, err := s.queue(make)
	if err != nil {
		return nil, err
	}
	if err := <-done; err != nil {
		return nil, err
	}
	return reply, nil
}

// queue feeds the input make makes and queues what it changed; done
// answers once that is durable.
func (s *Server) queue(make func() input) (reply any, done <-chan error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return nil, nil, s.broken
	}
	reply, err = s.step(s.clock.Now(), make())
	done = s.flushLocked()
	return reply, done, err
}
