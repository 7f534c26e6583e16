package sched

import "time"

// PendingOf is the Cycle's copy of the waiting run id, as it was last
// given; false when the Cycle holds no such run.
func (c *Cycle) PendingOf(id int64) (Pending, bool) {
	i, ok := c.pendingAt[id]
	if !ok {
		return Pending{}, false
	}
	return *c.pending[i], true
}

// Counts tells whether account a counts among its project's siblings in
// the Cycle's fairshare tree (it has usage, waiting runs, or a share).
func (c *Cycle) Counts(a Account) bool { return c.usage.isPresent(a) }

// FactorsOf is the priority factors at now of the waiting runs ps (as they
// are now), on the scales of the Cycle's whole queue: what Priorities over
// Snapshot(now) gives them, without copying the queue. squeue -j and
// scontrol show job ask for one run's priority among 100,000 waiting.
func (c *Cycle) FactorsOf(now time.Time, ps []Pending) []Factors {
	snap := c.snapshot()
	snap.Nodes = c.nodes
	pr := &prioritizer{s: &snap, w: snap.Weights, now: now, order: snap.Policy.strategy().order, fs: c.usage.fairshare()}
	if pr.w == nil {
		pr.w = &DefaultWeights
	}
	for i := range c.nodes {
		pr.totalCPUs += c.nodes[i].CPUs
	}
	// The scales, as newPrioritizer finds them over every waiting run:
	// the Cycle counts its runs by QOS priority and tier.
	for _, q := range c.cfg.QOS {
		pr.maxQOS = max(pr.maxQOS, q.Priority)
	}
	for q := range c.qosCount {
		pr.maxQOS = max(pr.maxQOS, q)
	}
	for t := range c.tierCount {
		pr.maxTier = max(pr.maxTier, t)
	}
	for i := range ps {
		pr.maxQOS = max(pr.maxQOS, qosPriority(&snap, &ps[i]))
		pr.maxTier = max(pr.maxTier, ps[i].Tier)
	}
	out := make([]Factors, len(ps))
	for i := range ps {
		out[i] = pr.factors(&ps[i])
	}
	return out
}
