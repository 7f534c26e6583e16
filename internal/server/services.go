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
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Services (issue 16). A service is a row of the services table (its
// configuration and wanted replica count) and its replicas, which are
// ordinary runs of the same project and name: they queue, schedule, count
// against limits and survive a restart as every run does. The reconciler
// below keeps them to the row, once a second and whenever something
// changes: it starts missing replicas, stops extra ones (drained first:
// the gateway sends them nothing new and waits for what they serve), and
// replaces those whose configuration differs from the row's, one at a
// time, a new one ready before an old one goes (a rolling update).
// Readiness is the gateway's: it probes each running replica through the
// tunnel (gateway.go).

// Reconciler timing.
const (
	serviceTick = time.Second
	// drainWait bounds how long a drained replica's requests may take.
	drainWait = 30 * time.Second
	// noProbeInterval is how often a replica without probes is checked
	// (a connection to its port).
	noProbeInterval = time.Second
	// rpsWindow is the autoscaler's window.
	rpsWindow = 60 * time.Second
	// replicaPortVar is the variable that tells a replica its port.
	replicaPortVar = "PORT"
	// submitsPerMinute bounds replica submissions per service, so that a
	// replica that dies at once does not loop fast.
	submitsPerMinute = 20
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
	draining bool
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
	submits  []time.Time
}

type services struct {
	pass  sync.Mutex // one reconciling pass at a time
	mu    sync.Mutex
	byKey map[svcKey]*svcInfo
	reps  map[int64]*replica
	wake  chan struct{}
	// ready is closed and replaced whenever a replica becomes ready.
	ready chan struct{}
	// domain is the parsed GatewayDomain (gateway_domain.go).
	domainOnce sync.Once
	domain     gatewayDomain
}

func (s *Server) svcInit() {
	s.svc.mu.Lock()
	defer s.svc.mu.Unlock()
	if s.svc.byKey == nil {
		s.svc.byKey = map[svcKey]*svcInfo{}
		s.svc.reps = map[int64]*replica{}
		s.svc.wake = make(chan struct{}, 1)
		s.svc.ready = make(chan struct{})
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
	t := time.NewTicker(serviceTick)
	defer t.Stop()
	for {
		if err := s.reconcileServices(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("services", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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
	if info := s.svc.byKey[svcKey{pid, t.Name}]; info != nil && info.row != nil {
		// A running service keeps its count within the new bounds.
		wanted = min(max(info.row.Wanted, r.Min), r.Max)
	}
	s.svc.mu.Unlock()
	if err := s.store.PutService(ctx, &store.Service{ProjectID: pid, Name: t.Name, UserID: u.ID, Spec: body, Wanted: wanted}); err != nil {
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
		if run.Name == t.Name && (out.ID == 0 || run.ID > out.ID) {
			out = s.apiRun(run, nil, u.Name, nil)
		}
	}
	return out, nil
}

// stopService ends a service: its row goes, and its replicas stop
// (drained first).
func (s *Server) stopService(ctx context.Context, run *store.Run) error {
	if err := s.store.DeleteService(ctx, run.ProjectID, run.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.reconcileServices(ctx)
}

// isServiceRun reports whether run is a service's replica.
func isServiceRun(run *store.Run) bool {
	return bytes.Contains(run.Spec, []byte(`"type":"service"`))
}

// reconcileServices does one pass over every service.
func (s *Server) reconcileServices(ctx context.Context) error {
	s.svcInit()
	s.svc.pass.Lock()
	defer s.svc.pass.Unlock()
	rows, err := s.store.ListServices(ctx)
	if err != nil {
		return err
	}
	s.svc.mu.Lock()
	known := len(s.svc.byKey)
	s.svc.mu.Unlock()
	if len(rows) == 0 && known == 0 {
		return nil // no service: no need to read the active runs
	}
	active, err := s.store.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		return err
	}
	byKey := map[svcKey][]*store.Run{}
	for _, run := range active {
		if isServiceRun(run) {
			k := svcKey{run.ProjectID, run.Name}
			byKey[k] = append(byKey[k], run)
		}
	}
	type action struct {
		submit *store.Service
		port   int
		stop   *replica
	}
	var acts []action
	now := time.Now()
	s.svc.mu.Lock()
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
			info.task = &t
			info.limits = newLimiter(t.RateLimits)
			info.scaledAt = now
		}
		info.row = row
	}
	for k, info := range s.svc.byKey {
		if !seen[k] {
			info.row, info.task = nil, nil
		}
		// The replicas: active runs of the key (draining ones included).
		runs := byKey[k]
		info.replica = info.replica[:0]
		for _, run := range runs {
			rep := s.svc.reps[run.ID]
			if rep == nil {
				var t spec.Task
				_ = json.Unmarshal(run.Spec, &t)
				rep = &replica{run: run.ID, key: k, port: replicaPort(&t)}
				s.svc.reps[run.ID] = rep
			}
			info.replica = append(info.replica, rep)
		}
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
		s.autoscaleLocked(info, now)
		want := specKey(info.task)
		var cur, old []*replica
		for _, rep := range info.replica {
			if rep.draining {
				continue
			}
			var run *store.Run
			for _, r := range runs {
				if r.ID == rep.run {
					run = r
				}
			}
			if run.StopReq != 0 {
				continue
			}
			var t spec.Task
			if json.Unmarshal(run.Spec, &t) == nil && specKey(&t) == want {
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
		switch {
		case len(old) > 0 && notReady > 0:
			// A new replica is on its way: wait for it.
		case len(old) > 0 && len(cur)+len(old) > wanted:
			acts = append(acts, action{stop: old[0]})
		case len(old) > 0:
			acts = append(acts, action{submit: info.row})
		case len(cur) < wanted:
			for i := len(cur); i < wanted; i++ {
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
	for id, rep := range s.svc.reps {
		if _, ok := s.svc.byKey[rep.key]; !ok || !slices.Contains(s.svc.byKey[rep.key].replica, rep) {
			delete(s.svc.reps, id)
		}
	}
	// Submissions, bounded per service.
	for i := range acts {
		if row := acts[i].submit; row != nil {
			info := s.svc.byKey[svcKey{row.ProjectID, row.Name}]
			info.submits = slices.DeleteFunc(info.submits, func(t time.Time) bool { return now.Sub(t) > time.Minute })
			if len(info.submits) >= submitsPerMinute {
				acts[i].submit = nil
				continue
			}
			info.submits = append(info.submits, now)
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
	s.svc.mu.Unlock()

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
	switch {
	case desired > cur && cur > 0 && since < up:
		return
	case desired < cur && since < down:
		return
	case desired == cur:
		return
	}
	info.scaledAt = now
	info.row.Wanted = desired
	go func(k svcKey, n int) {
		if err := s.store.SetServiceWanted(context.Background(), k.project, k.name, n); err != nil {
			s.log.Warn("service scale", "service", k.name, "err", err)
		}
	}(info.key, desired)
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

func (r *rate) count(now time.Time) int {
	sec, total := now.Unix(), int64(0)
	for i := range r.n {
		if sec-r.at[i] < int64(len(r.n)) {
			total += r.n[i]
		}
	}
	return int(total)
}
