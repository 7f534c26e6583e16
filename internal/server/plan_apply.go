package server

import (
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/sched"
)

// applyPlan is a pass's last step: it applies what of plan still holds
// and queues it. It takes the lock only to apply: what of the plan's
// reasons is new is sorted out before.
func (s *Server) applyPlan(p *control.Pass, plan sched.Plan) {
	reasons := s.NewReasons(plan)
	if _, _, err := s.queue(func() control.Input { return control.PlanInput{Pass: p, Plan: plan, Reasons: reasons} }); err == nil {
		s.metrics.cycles.Add(1)
	}
	s.ForgetReasons(p, plan)
}
