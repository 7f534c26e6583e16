package control

import (
	"fmt"
	"time"

	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/store"
)

// A service's replicas are runs of the service's name (internal/server/
// services.go); the service itself is a row the server keeps them to.
// When the service fails (its replicas crash in a loop), its end gets a
// run record of its own, as dstack's service run ends: a run of the
// service's configuration that never went to a node, ended failed with
// the reason the server gives, its history saying why. `berth ps` and
// the API list it as any ended run, and it is stored as one, so it
// outlives a restart.

// ServiceFailedInput: the server records that a service failed. Submit is
// the service's configuration as its replicas are submitted (Opts are
// ignored: the record is submitted held; a submit limit that refuses it
// refuses the input, and the failure is then in the last replica's
// history alone), Reason the run's final reason and Message the line of
// history that says why.
type ServiceFailedInput struct {
	Submit  SubmitInput
	Reason  lifecycle.Reason
	Message string
}

func (ServiceFailedInput) isInput() {}

// onServiceFailed makes the failed service's record: a run submitted held
// and failed in the same step, both in one batch, so that no crash leaves
// a held service run behind.
func (s *Cluster) onServiceFailed(now time.Time, in ServiceFailedInput) (any, error) {
	sub := in.Submit
	sub.Opts = SubmitOpts{Hold: true}
	if sub.Task == nil || !sub.Task.IsService() {
		return nil, fmt.Errorf("%w: a service's record needs its service configuration", ErrInvalid)
	}
	v, err := s.onSubmit(now, sub)
	if err != nil {
		return nil, err
	}
	rec, ok := v.(store.Run)
	rs := s.runs[rec.ID]
	if !ok || rs == nil || len(s.out) == 0 {
		return nil, fmt.Errorf("control: service %q: its record was not made", sub.Task.Name)
	}
	b := s.out[len(s.out)-1].Batch // the submission's: the end joins it
	b.Events = append(b.Events, &store.Event{RunID: rec.ID, Time: now, Type: "failed", Message: in.Message})
	s.stepLocked(rs, lifecycle.Event{Kind: lifecycle.Failed, Status: lifecycle.StatusFailed, Reason: in.Reason}, now, b)
	return *runCopy(rs), nil
}
