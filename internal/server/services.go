package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Services (issue 16). A service is a row of the services table (its
// configuration and wanted replica count) and its replicas, which are
// ordinary runs of the same project and name: they queue, schedule, count
// against limits and survive a restart as every run does. The reconciler
// below keeps them to the row whenever something changes (events and
// timers at the next deadline, services_wake.go): it starts missing replicas, stops extra ones (drained first:
// the gateway sends them nothing new and waits for what they serve), and
// replaces those whose configuration differs from the row's, one at a
// time, a new one ready before an old one goes (a rolling update).
// Readiness is the gateway's: it probes each running replica through the
// tunnel (gateway.go).

// Reconciler timing.
const (
	// serviceSafety is the pass that comes when nothing woke the
	// reconciler for that long (a missed event is late, not lost).
	serviceSafety = 30 * time.Second
	// drainWait bounds how long a drained replica's requests may take.
	drainWait = 30 * time.Second
	// noProbeInterval is how often a replica without probes is checked
	// (a connection to its port).
	noProbeInterval = time.Second
	// rpsWindow is the autoscaler's window.
	rpsWindow = 60 * time.Second
	// replicaPortVar is the variable that tells a replica its port.
	replicaPortVar = "PORT"
)

type svcKey struct {
	project int64
	name    string
}

// replica is what the server knows of a replica run beyond the store.
type replica struct {
	run      int64
	key      svcKey
	port     int
	ready    bool
	okRow    int // probes passed in a row
	probing  bool
	probedAt time.Time
	every    time.Duration // how often it is probed
	draining bool
	spec     string // specKey of its configuration
	inflight int
	idle     chan struct{} // closed when draining and inflight reaches 0
}

// svcInfo is a service as the gateway and reconciler see it.
type svcInfo struct {
	key     svcKey
	row     *store.Service
	task    *spec.Task
	replica []*replica // active replicas (draining ones too)
	rr      int
	hits    rate // requests, per second of the last rpsWindow
	// scaledAt is the autoscaler's last event (a scaling, the service's
	// apply or the server's start): scale_up_delay and scale_down_delay
	// count from it, as dstack's.
	scaledAt time.Time
	limits   *limiter // rate_limits (nil: none; gateway_limits.go)
	found    bool     // its replicas were looked up in the store
	// fails counts replicas in a row that ended by themselves; the next
	// is not submitted before notBefore (a timer wakes the loop then).
	fails     int
	notBefore time.Time
	// rateFrom: the request rate is known from then on (a service this
	// server found at its start: its rate before is lost), so no scaling
	// down before a whole rpsWindow has passed since (zero: known).
	rateFrom time.Time
	// saveScale, saveBackoff: row.Wanted and scaledAt, fails and
	// notBefore changed in memory, to be written by the next pass (one
	// writer, in order).
	saveScale, saveBackoff bool
	// endsSeen: the replicas' ends up to then are counted in fails, as
	// the store has it; catchUp: found at this server's start, its
	// replicas that ended after endsSeen (while no server counted) are
	// to be counted.
	endsSeen time.Time
	catchUp  bool
}

type services struct {
	pass  sync.Mutex // one reconciling pass at a time
	mu    sync.Mutex
	byKey map[svcKey]*svcInfo
	reps  map[int64]*replica
	wake  chan struct{}
	// ready is closed and replaced whenever a replica becomes ready.
	ready chan struct{}
	// rows are the services' rows as last read (rowsRead), to be read
	// again when rowsDirty (this server changed them).
	rows                []*store.Service
	rowsRead, rowsDirty bool
	scanned             bool // the active runs were read once
	// backoff is the first wait after a replica ended by itself
	// (replicaBackoff; tests shorten it).
	backoff time.Duration
	// domain is the parsed GatewayDomain (gateway_domain.go).
	domainOnce sync.Once
	domain     gatewayDomain
	// The timer at the next deadline (services_wake.go).
	timer    *time.Timer
	timerAt  time.Time
	timerGen uint64
	// passes counts reconciling passes (tests, benchmarks); safety is
	// serviceSafety (tests lengthen it).
	passes atomic.Int64
	safety time.Duration
	// tlsPort is the HTTPS listener's port (0: none; gateway_tls.go).
	tlsPort int
}

func (s *Server) svcInit() {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	if s.svc.byKey == nil {
		s.svc.byKey = map[svcKey]*svcInfo{}
		s.svc.reps = map[int64]*replica{}
		s.svc.wake = make(chan struct{}, 1)
		s.svc.ready = make(chan struct{})
		s.svc.backoff = replicaBackoff
		s.svc.safety = serviceSafety
	}
}

func (s *Server) wakeServices() {
	s.svcInit()
	select {
	case s.svc.wake <- struct{}{}:
	default:
	}
}

// serviceLoop reconciles services until ctx ends.
func (s *Server) serviceLoop(ctx context.Context) {
	s.svcInit()
	safety := time.NewTimer(serviceSafety)
	defer safety.Stop()
	for {
		if err := s.reconcileServices(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("services", "err", err)
			s.wakeServicesAt(time.Now().Add(time.Second)) // try again
		}
		s.svc.mu.Lock()
		every := s.svc.safety
		s.svc.mu.Unlock()
		safety.Reset(every)
		select {
		case <-ctx.Done():
			return
		case <-safety.C:
		case <-s.svc.wake:
		}
	}
}

// specKey is the part of a service's configuration whose change replaces
// its replicas: all but the replica count, scaling and gateway settings.
func specKey(t *spec.Task) string {
	c := *t
	c.Replicas, c.Scaling, c.Auth, c.StripPrefix, c.RateLimits, c.Model, c.HTTPS = nil, nil, nil, nil, nil, nil, ""
	c.Probes = nil
	c.Env = slices.DeleteFunc(slices.Clone(c.Env), func(v spec.EnvVar) bool { return v.Name == replicaPortVar })
	b, _ := json.Marshal(&c)
	return string(b)
}

// applyService creates or changes a service: its row now, its replicas
// by the reconciler. It answers the service's newest replica.
func (s *Server) applyService(ctx context.Context, u *store.User, t *spec.Task) (*api.Run, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("%w: name: required for a service (its gateway path is /proxy/services/PROJECT/NAME/)", ErrInvalid)
	}
	pid, project, err := s.projectFor(ctx, u, t.Project)
	if err != nil {
		return nil, err
	}
	t.Project = project
	body, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	r := t.ReplicaRange()
	wanted := r.Min // 0: the first request starts one
	s.svcInit()
	s.svc.mu.Lock()
	if info := s.svc.byKey[svcKey{pid, t.Name}]; info != nil {
		if info.row != nil {
			// A running service keeps its count within the new bounds.
			wanted = min(max(info.row.Wanted, r.Min), r.Max)
		}
		info.fails, info.notBefore = 0, time.Time{} // an apply tries again at once
	}
	s.svc.mu.Unlock()
	err = s.store.PutService(ctx, &store.Service{ProjectID: pid, Name: t.Name, UserID: u.ID, Spec: body, Wanted: wanted})
	s.svc.mu.Lock()
	s.svc.rowsDirty = true
	s.svc.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.reconcileServices(ctx); err != nil {
		return nil, err
	}
	out := &api.Run{Name: t.Name, Project: project, Status: api.StatusSubmitted}
	runs, err := s.store.ListRuns(ctx, store.RunFilter{ProjectID: pid})
	if err != nil {
		return nil, err
	}
	for _, run := range runs {
		if run.Name == t.Name && run.Reason != string(lifecycle.ReasonRetryLimit) && (out.ID == 0 || run.ID > out.ID) {
			out = s.apiRun(run, nil, u.Name, nil)
		}
	}
	return out, nil
}

// stopService ends a service: its row goes, and its replicas stop
// (drained first).
func (s *Server) stopService(ctx context.Context, run *store.Run) error {
	err := s.store.DeleteService(ctx, run.ProjectID, run.Name)
	s.svcInit()
	s.svc.mu.Lock()
	s.svc.rowsDirty = true
	s.svc.mu.Unlock()
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.reconcileServices(ctx)
}

// stopReplica is a user's stop of one replica (by its ID): the gateway
// sends it nothing new and lets what it serves finish (up to drainWait)
// before the stop goes ahead; the reconciler replaces it meanwhile.
func (s *Server) stopReplica(run *store.Run) {
	s.svcInit()
	s.svc.mu.Lock()
	rep := s.svc.reps[run.ID]
	if rep == nil || rep.draining {
		s.svc.mu.Unlock()
		return
	}
	rep.draining = true
	rep.idle = make(chan struct{})
	if rep.inflight == 0 {
		close(rep.idle)
	}
	s.svc.mu.Unlock()
	if _, err := s.do(control.NoteInput{RunID: run.ID, Type: "service", Message: fmt.Sprintf("service %s: replica stopped by its user; drained, and another replaces it", run.Name)}); err != nil {
		s.log.Warn("service note", "run_id", run.ID, "err", err)
	}
	s.wakeServices()
	select {
	case <-rep.idle:
	case <-time.After(drainWait):
	}
}

// isServiceRun reports whether run is a service's replica.
func isServiceRun(run *store.Run) bool {
	return bytes.Contains(run.Spec, []byte(`"type":"service"`))
}

// reconcileServices does one pass over every service. It reads the
// services' rows from the store only when they changed (this server
// writes them all), and its replicas' states from the cluster's memory:
// an idle service costs no query. A service's replicas are found in the
// store once (its first pass after a start or an apply: ListRuns by
// name); replicas it submits it knows from then on.
func (s *Server) reconcileServices(ctx context.Context) error {
	s.svcInit()
	s.svc.pass.Lock()
	defer s.svc.pass.Unlock()
	s.svc.passes.Add(1)
	s.svc.mu.Lock()
	rows, fresh := s.svc.rows, s.svc.rowsRead && !s.svc.rowsDirty
	s.svc.rowsDirty = false
	s.svc.mu.Unlock()
	if !fresh {
		var err error
		if rows, err = s.store.ListServices(ctx); err != nil {
			s.svc.mu.Lock()
			s.svc.rowsDirty = true
			s.svc.mu.Unlock()
			return err
		}
	}
	now := time.Now()
	s.svc.mu.Lock()
	s.svc.rows, s.svc.rowsRead = rows, true
	if len(rows) == 0 && len(s.svc.byKey) == 0 && s.svc.scanned {
		s.svc.mu.Unlock()
		return nil
	}
	var find []svcKey // services whose replicas are to be found
	var failed []svcKey
	seen := map[svcKey]bool{}
	for _, row := range rows {
		k := svcKey{row.ProjectID, row.Name}
		seen[k] = true
		info := s.svc.byKey[k]
		if info == nil {
			info = &svcInfo{key: k}
			s.svc.byKey[k] = info
		}
		if info.row == nil || !bytes.Equal(info.row.Spec, row.Spec) {
			var t spec.Task
			if err := json.Unmarshal(row.Spec, &t); err != nil {
				s.svc.mu.Unlock()
				return fmt.Errorf("service %q: %w", row.Name, err)
			}
			if info.task == nil {
				// Found in the store (at a start, or applied): its
				// autoscaler and backoff as last written.
				info.scaledAt, info.fails, info.notBefore, info.endsSeen = row.ScaledAt, row.Fails, row.NotBefore, row.EndsSeen
				if info.scaledAt.IsZero() {
					info.scaledAt = now
				}
				if !s.svc.scanned {
					info.rateFrom = now
					info.catchUp = !info.endsSeen.IsZero()
				}
			} else {
				info.scaledAt = now
			}
			info.task = &t
			info.limits = newLimiter(t.RateLimits)
		}
		if info.row != nil && info.saveScale {
			row.Wanted = info.row.Wanted // not written yet: memory's is newer
		}
		info.row = row
		if info.fails >= maxReplicaFailures && !slices.Contains(failed, k) {
			// It failed, and the server stopped before the row went.
			failed = append(failed, k)
		}
		if !info.found {
			find = append(find, k)
		}
	}
	for k, info := range s.svc.byKey {
		if !seen[k] {
			info.row, info.task = nil, nil
			info.saveScale, info.saveBackoff = false, false
		}
	}
	s.svc.mu.Unlock()

	if !s.svc.scanned {
		// The first pass after a start reads every active run once: the
		// replicas of a service stopped just before the restart are
		// stopped too.
		runs, err := s.store.ListRuns(ctx, store.RunFilter{})
		if err != nil {
			return err
		}
		s.svc.mu.Lock()
		for _, run := range runs {
			k := svcKey{run.ProjectID, run.Name}
			if isServiceRun(run) && s.svc.byKey[k] == nil {
				s.svc.byKey[k] = &svcInfo{key: k}
				find = append(find, k)
			}
		}
		s.svc.scanned = true
		s.svc.mu.Unlock()
	}
	for _, k := range find {
		f := store.RunFilter{ProjectID: k.project, Name: k.name}
		s.svc.mu.Lock()
		if info := s.svc.byKey[k]; info != nil && info.catchUp {
			// Those that ended since the count was written too: they are
			// counted as they would have been (their end is not live).
			f.All, f.Since = true, info.endsSeen
			info.catchUp = false
		}
		s.svc.mu.Unlock()
		runs, err := s.store.ListRuns(ctx, f)
		if err != nil {
			return err
		}
		slices.SortFunc(runs, func(a, b *store.Run) int { return int(a.ID - b.ID) }) // ends counted in order
		s.svc.mu.Lock()
		info := s.svc.byKey[k]
		for _, run := range runs {
			if run.Status != "" && api.Status(run.Status).Finished() && (run.FinishedAt.IsZero() || !run.FinishedAt.After(f.Since) || run.Reason == string(lifecycle.ReasonRetryLimit)) {
				continue
			}
			if info != nil && isServiceRun(run) && s.svc.reps[run.ID] == nil {
				var t spec.Task
				_ = json.Unmarshal(run.Spec, &t)
				rep := &replica{run: run.ID, key: k, port: replicaPort(&t), spec: specKey(&t)}
				s.svc.reps[run.ID] = rep
				info.replica = append(info.replica, rep)
			}
		}
		if info != nil {
			info.found = true
		}
		s.svc.mu.Unlock()
	}

	// Which replicas are still active, and which were asked to stop: the
	// cluster's memory.
	s.svc.mu.Lock()
	ids := make([]int64, 0, len(s.svc.reps))
	for id := range s.svc.reps {
		ids = append(ids, id)
	}
	s.svc.mu.Unlock()
	live := make(map[int64]bool, len(ids))
	stopping := map[int64]bool{}
	s.mu.Lock()
	for _, id := range ids {
		if rec, ok := s.Cluster.ActiveRunRecord(id); ok {
			live[id] = true
			stopping[id] = rec.StopReq != 0
		}
	}
	// Every end up to now (by the cluster's clock) is seen by this pass.
	seenAt := s.clock.Now()
	s.mu.Unlock()
	// The replicas that ended without the reconciler's stop: how.
	s.svc.mu.Lock()
	var gone []*replica
	for _, id := range ids {
		if rep := s.svc.reps[id]; rep != nil && !live[id] && !rep.draining {
			gone = append(gone, rep)
		}
	}
	s.svc.mu.Unlock()
	ended := map[int64]*store.Run{}
	for _, rep := range gone {
		if run, err := s.store.GetRun(ctx, rep.run); err == nil {
			if !api.Status(run.Status).Finished() {
				// Its end is in memory, not yet in the store (the commit
				// path woke this pass first): kept until it is.
				live[rep.run] = true
				s.wakeServicesAt(time.Now().Add(100 * time.Millisecond))
				continue
			}
			ended[rep.run] = run
		}
	}

	type action struct {
		submit *store.Service
		port   int
		stop   *replica
	}
	var acts []action
	var notes []control.NoteInput
	var why = map[svcKey]string{} // why a service failed
	s.svc.mu.Lock()
	for k, info := range s.svc.byKey {
		// The replicas: the active ones (draining ones included).
		kept := info.replica[:0]
		for _, rep := range info.replica {
			if live[rep.run] {
				kept = append(kept, rep)
				continue
			}
			delete(s.svc.reps, rep.run)
			if run := ended[rep.run]; run != nil && info.row != nil {
				if n, fail := s.replicaEndedLocked(info, rep, run, now); n != nil {
					notes = append(notes, *n)
					if fail && !slices.Contains(failed, k) {
						failed = append(failed, k)
						why[k] = n.Message
					}
				}
			}
		}
		clear(info.replica[len(kept):])
		info.replica = kept
		if info.row == nil {
			for _, rep := range info.replica {
				if !rep.draining {
					acts = append(acts, action{stop: rep})
				}
			}
			if len(info.replica) == 0 {
				delete(s.svc.byKey, k)
			}
			continue
		}
		if slices.Contains(failed, k) {
			continue
		}
		s.autoscaleLocked(info, now)
		want := specKey(info.task)
		var cur, old []*replica
		for _, rep := range info.replica {
			if rep.draining || stopping[rep.run] {
				continue
			}
			if rep.spec == want {
				cur = append(cur, rep)
			} else {
				old = append(old, rep)
			}
		}
		wanted := info.row.Wanted
		notReady := 0
		for _, rep := range cur {
			if !rep.ready {
				notReady++
			}
		}
		// A crash-looping service waits out its backoff before it
		// submits again.
		mayStart := !now.Before(info.notBefore)
		if !mayStart {
			s.wakeAtLocked(info.notBefore)
		}
		switch {
		case len(old) > 0 && notReady > 0:
			// A new replica is on its way: wait for it.
		case len(old) > 0 && len(cur)+len(old) > wanted:
			acts = append(acts, action{stop: old[0]})
		case len(old) > 0:
			if mayStart {
				acts = append(acts, action{submit: info.row})
			}
		case len(cur) < wanted:
			for i := len(cur); i < wanted && mayStart; i++ {
				acts = append(acts, action{submit: info.row})
			}
		case len(cur) > wanted:
			// The not ready first, then the newest.
			slices.SortStableFunc(cur, func(a, b *replica) int {
				if a.ready != b.ready {
					if a.ready {
						return 1
					}
					return -1
				}
				return int(b.run - a.run)
			})
			for _, rep := range cur[:len(cur)-wanted] {
				acts = append(acts, action{stop: rep})
			}
		}
	}
	for i := range acts {
		if row := acts[i].submit; row != nil {
			info := s.svc.byKey[svcKey{row.ProjectID, row.Name}]
			// A port no other replica of the service has: native replicas
			// on one node share its network.
			used := map[int]bool{}
			for _, rep := range info.replica {
				used[rep.port] = true
			}
			for j := range acts[:i] {
				if acts[j].submit != nil && acts[j].submit.Name == row.Name && acts[j].submit.ProjectID == row.ProjectID {
					used[acts[j].port] = true
				}
			}
			port := info.task.ServicePort()
			for used[port] && port < 65535 {
				port++
			}
			acts[i].port = port
		}
		if rep := acts[i].stop; rep != nil {
			rep.draining = true
			rep.idle = make(chan struct{})
			if rep.inflight == 0 {
				close(rep.idle)
			}
		}
	}
	saves := s.svcSavesLocked(failed, seenAt)
	s.svc.mu.Unlock()

	// What changed in memory, written in order (this pass is the one
	// writer): a restart reads it back.
	for _, sv := range saves {
		if err := sv(ctx); err != nil && !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("service state", "err", err)
		}
	}

	for _, n := range notes {
		if _, err := s.do(n); err != nil {
			s.log.Warn("service note", "run_id", n.RunID, "err", err)
		}
	}
	for _, k := range failed {
		if err := s.serviceFailed(ctx, k, why[k]); err != nil {
			return err
		}
		s.log.Warn("service failed", "service", k.name)
		s.svc.mu.Lock()
		s.svc.rowsDirty = true
		s.svc.mu.Unlock()
		s.wakeServices()
	}
	for _, a := range acts {
		if a.submit != nil {
			if err := s.submitReplica(ctx, a.submit, a.port); err != nil {
				s.log.Warn("service replica", "service", a.submit.Name, "err", err)
			}
		}
		if rep := a.stop; rep != nil {
			go s.drainAndStop(rep)
		}
	}
	s.probeReplicas()
	return nil
}

// Crash loops: a replica that ends by itself (not drained, not stopped by
// a user) is replaced after a wait that doubles with each such end in a
// row, from replicaBackoff to maxReplicaBackoff; the count starts again
// when a replica becomes ready. After maxReplicaFailures in a row while
// no replica is ready, the service fails: its row goes (as a stop), its
// replicas stop, and the last one's history says why. dstack fails a
// service at its first failed replica unless `retry` is set; Berth
// replaces replicas, but not for ever.
const (
	replicaBackoff     = time.Second
	maxReplicaBackoff  = 5 * time.Minute
	maxReplicaFailures = 5
)

// replicaEndedLocked counts a replica of info that ended (run, its
// record) and says so in its history: a user's stop is only replaced; an
// end of its own adds to the failures in a row and sets the backoff, or
// fails the service (fail).
func (s *Server) replicaEndedLocked(info *svcInfo, rep *replica, run *store.Run, now time.Time) (note *control.NoteInput, fail bool) {
	how := run.Status
	if run.Reason != "" {
		how += " " + run.Reason
	}
	if run.ExitCode != nil && *run.ExitCode != 0 {
		how += fmt.Sprintf(", exit %d", *run.ExitCode)
	}
	switch lifecycle.Reason(run.Reason) {
	case lifecycle.ReasonTerminatedByUser, lifecycle.ReasonAbortedByUser:
		return &control.NoteInput{RunID: run.ID, Type: "service", Message: fmt.Sprintf("service %s: replica stopped (%s); another replaces it", info.key.name, how)}, false
	}
	info.fails++
	info.saveBackoff = true // the failure too: a restart finishes it
	ready := slices.ContainsFunc(info.replica, func(r *replica) bool { return r.ready && r != rep })
	if info.fails >= maxReplicaFailures && !ready {
		return &control.NoteInput{RunID: run.ID, Type: "failed", Message: fmt.Sprintf("service %s failed: %d replicas in a row ended before one was ready (the last: %s); no more are started (berth apply starts it again)",
			info.key.name, info.fails, how)}, true
	}
	info.saveBackoff = true
	wait := min(s.svc.backoff<<min(info.fails-1, 20), maxReplicaBackoff)
	info.notBefore = now.Add(wait)
	return &control.NoteInput{RunID: run.ID, Type: "service", Message: fmt.Sprintf("service %s: replica ended (%s), %d in a row; the next starts in %s", info.key.name, how, info.fails, wait)}, false
}

// svcSavesLocked is what the pass writes of the services' state changed
// in memory (the autoscaler's count and last scaling, the crash-loop
// count and backoff), in order; failed services' backoff first of all,
// so that a restart before their row goes finishes their failure.
func (s *Server) svcSavesLocked(failed []svcKey, seenAt time.Time) []func(context.Context) error {
	var out []func(context.Context) error
	for _, info := range s.svc.byKey {
		if info.row == nil {
			continue
		}
		k := info.key
		if info.saveBackoff {
			info.saveBackoff = false
			info.endsSeen = seenAt
			fails, notBefore := info.fails, info.notBefore
			out = append(out, func(ctx context.Context) error {
				return s.store.SetServiceBackoff(ctx, k.project, k.name, fails, notBefore, seenAt)
			})
		}
		if info.saveScale && !slices.Contains(failed, k) {
			info.saveScale = false
			wanted, at := info.row.Wanted, info.scaledAt
			out = append(out, func(ctx context.Context) error { return s.store.SetServiceScale(ctx, k.project, k.name, wanted, at) })
		}
	}
	return out
}

// serviceFailed ends failed service k: the record of its end (a run of
// its configuration, failed retry_limit_exceeded, its history saying
// why: control.ServiceFailedInput), then its row goes, which stops what
// is left of its replicas. A server stopped in between finds the row's
// failure count at its next start and finishes (the record made once).
func (s *Server) serviceFailed(ctx context.Context, k svcKey, why string) error {
	s.svc.mu.Lock()
	var row *store.Service
	if info := s.svc.byKey[k]; info != nil {
		row = info.row
	}
	s.svc.mu.Unlock()
	if row != nil {
		if why == "" {
			why = fmt.Sprintf("service %s failed: %d replicas in a row ended before one was ready (the server restarted before it recorded the end); no more are started (berth apply starts it again)", k.name, maxReplicaFailures)
		}
		last, err := s.store.FindRun(ctx, k.project, k.name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if last == nil || last.Reason != string(lifecycle.ReasonRetryLimit) {
			if err := s.recordServiceEnd(ctx, row, why); err != nil {
				// The failure stands: the last replica's history says it.
				s.log.Warn("service failed: no record of its end", "service", k.name, "err", err)
			}
		}
	}
	if err := s.store.DeleteService(ctx, k.project, k.name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// recordServiceEnd makes the run that records row's service failed.
func (s *Server) recordServiceEnd(ctx context.Context, row *store.Service, why string) error {
	var t spec.Task
	if err := json.Unmarshal(row.Spec, &t); err != nil {
		return err
	}
	user, err := s.store.UserName(ctx, row.UserID)
	if err != nil {
		return err
	}
	_, err = s.do(control.ServiceFailedInput{
		Submit: control.SubmitInput{UserID: row.UserID, User: user, ProjectID: row.ProjectID, Project: t.Project, Task: &t, Body: row.Spec},
		Reason: lifecycle.ReasonRetryLimit, Message: why})
	return err
}

// replicaPort is the port a replica serves on: its PORT, else the
// service's port.
func replicaPort(t *spec.Task) int {
	for _, v := range slices.Backward(t.Env) {
		if v.Name == replicaPortVar {
			if p, err := strconv.Atoi(v.Value); err == nil && p > 0 && p < 65536 {
				return p
			}
		}
	}
	return t.ServicePort()
}

// submitReplica submits one replica run of row, serving on port.
func (s *Server) submitReplica(ctx context.Context, row *store.Service, port int) error {
	name, err := s.store.UserName(ctx, row.UserID)
	if err != nil {
		return err
	}
	u, err := s.store.UserByName(ctx, name)
	if err != nil {
		return err
	}
	var t spec.Task
	if err := json.Unmarshal(row.Spec, &t); err != nil {
		return err
	}
	t.Env = append(t.Env, spec.EnvVar{Name: replicaPortVar, Value: strconv.Itoa(port)})
	run, err := s.submit(u, &t, nil, control.SubmitOpts{})
	if err != nil {
		return err
	}
	k := svcKey{row.ProjectID, row.Name}
	s.svc.mu.Lock()
	if info := s.svc.byKey[k]; info != nil && s.svc.reps[run.ID] == nil {
		rep := &replica{run: run.ID, key: k, port: port, spec: specKey(&t)}
		s.svc.reps[run.ID] = rep
		info.replica = append(info.replica, rep)
	}
	s.svc.mu.Unlock()
	s.log.Info("service replica submitted", "service", row.Name, "run_id", run.ID)
	return nil
}

// drainAndStop stops rep once its requests are done (or drainWait).
func (s *Server) drainAndStop(rep *replica) {
	select {
	case <-rep.idle:
	case <-time.After(drainWait):
	}
	if err := s.stop(rep.run, false); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("service replica stop", "run_id", rep.run, "err", err)
	}
	s.log.Info("service replica drained and stopped", "service", rep.key.name, "run_id", rep.run)
	s.wakeServices()
}

// Autoscaler delays, dstack's defaults.
const (
	defaultScaleUpDelay   = 5 * time.Minute
	defaultScaleDownDelay = 10 * time.Minute
)

// autoscaleLocked moves a scaled service's wanted count from the
// gateway's request rate, as dstack's autoscaler: up once scale_up_delay
// has passed since the last scaling event (from zero at once: a request
// waits), down once scale_down_delay has.
func (s *Server) autoscaleLocked(info *svcInfo, now time.Time) {
	t := info.task
	if t.Scaling == nil {
		return
	}
	r := t.ReplicaRange()
	desired := desiredReplicas(info.hits.count(now), rpsWindow, t.Scaling.Target, r)
	cur := info.row.Wanted
	up, down := defaultScaleUpDelay, defaultScaleDownDelay
	if d := t.Scaling.ScaleUpDelay; d != nil {
		up = d.Std()
	}
	if d := t.Scaling.ScaleDownDelay; d != nil {
		down = d.Std()
	}
	since := now.Sub(info.scaledAt)
	if desired <= cur && cur > r.Min {
		// The rate falls as the window's requests age: look again when
		// the oldest leaves it.
		s.wakeAtLocked(info.hits.nextDrop(now))
	}
	switch {
	case desired > cur && cur > 0 && since < up:
		s.wakeAtLocked(info.scaledAt.Add(up))
		return
	case desired < cur && since < down:
		s.wakeAtLocked(info.scaledAt.Add(down))
		return
	case desired == cur:
		return
	}
	if desired < cur && now.Sub(info.rateFrom) < rpsWindow {
		// The rate before this server's start is lost: a busy service is
		// not scaled down before a whole window of it was seen.
		s.wakeAtLocked(info.rateFrom.Add(rpsWindow))
		return
	}
	info.scaledAt = now
	info.row.Wanted = desired
	info.saveScale = true
	s.log.Info("service scaled", "service", info.key.name, "from", cur, "to", desired)
}

// desiredReplicas is the replica count for hits requests in window at
// target requests per second per replica, within r.
func desiredReplicas(hits int, window time.Duration, target float64, r spec.Replicas) int {
	rps := float64(hits) / window.Seconds()
	n := int(math.Ceil(rps / target))
	return min(max(n, r.Min), r.Max)
}

// handleServiceSubmit is handleSubmit for a service.
func (s *Server) handleServiceSubmit(w http.ResponseWriter, r *http.Request, u *store.User, t *spec.Task) {
	run, err := s.applyService(r.Context(), u, t)
	if err != nil {
		writeError(w, err)
		return
	}
	run.URLs = s.serviceURLs(run.Project, t.Name) // gateway_domain.go
	writeJSON(w, http.StatusCreated, run)
}

// rate counts requests per second over the last rpsWindow.
type rate struct {
	n  [60]int64
	at [60]int64 // the Unix second n counts
}

func (r *rate) add(now time.Time) {
	sec := now.Unix()
	i := sec % int64(len(r.n))
	if r.at[i] != sec {
		r.at[i], r.n[i] = sec, 0
	}
	r.n[i]++
}

// nextDrop is when the oldest request in the window leaves it (zero:
// none in it).
func (r *rate) nextDrop(now time.Time) time.Time {
	sec, oldest := now.Unix(), int64(0)
	for i := range r.n {
		if r.n[i] > 0 && sec-r.at[i] < int64(len(r.n)) && (oldest == 0 || r.at[i] < oldest) {
			oldest = r.at[i]
		}
	}
	if oldest == 0 {
		return time.Time{}
	}
	return time.Unix(oldest+int64(len(r.n)), 0)
}

func (r *rate) count(now time.Time) int {
	sec, total := now.Unix(), int64(0)
	for i := range r.n {
		if sec-r.at[i] < int64(len(r.n)) {
			total += r.n[i]
		}
	}
	return int(total)
}
