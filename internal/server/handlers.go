package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// readSpec reads a submission's configuration, normalized and validated
// again on the server: clients are not trusted to have done it.
func (s *Server) readSpec(r *http.Request, u *store.User) (*spec.Task, error) {
	req, err := s.readSubmit(r, u)
	if err != nil {
		return nil, err
	}
	return req.Spec, nil
}

// readSubmit reads a submission: its configuration, checked as readSpec
// says, and its options.
func (s *Server) readSubmit(r *http.Request, u *store.User) (*api.SubmitRequest, error) {
	// The configuration is decoded on its own, by the YAML path's rules:
	// unknown fields, values out of bounds and commands over the script
	// limit are refused with their field, line and column.
	var body struct {
		api.SubmitRequest
		Spec json.RawMessage `json:"spec"`
	}
	if err := decodeLimit(r, &body, 2*s.cfg.MaxScriptBytes+maxBody); err != nil {
		return nil, err
	}
	req := body.SubmitRequest
	if len(body.Spec) == 0 || string(body.Spec) == "null" {
		return nil, fmt.Errorf("%w: the request has no configuration (its \"spec\" is missing)", ErrInvalid)
	}
	what := cmp.Or(req.Source, "spec")
	t, err := spec.DecodeJSON(body.Spec, spec.Limits{ScriptBytes: s.cfg.MaxScriptBytes})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	req.Spec = t
	if err := s.admit(t); err != nil {
		return nil, err
	}
	// The secrets it references are its project's (the one it goes to).
	pid, pname, err := s.projectFor(r.Context(), u, t.Project)
	if err != nil {
		return nil, err
	}
	if err := s.admitVolumes(r.Context(), t, pid, pname); err != nil { // volumes.go
		return nil, err
	}
	if err := s.checkSecretRefs(t, what, pid); err != nil {
		return nil, err
	}
	return &req, nil
}

// admit checks what only the server knows of a configuration already
// normalised and validated (spec.DecodeJSON does both).
func (s *Server) admit(t *spec.Task) error {
	if n := t.JobCount(); n > s.cfg.MaxNodesPerRun {
		// Checked before anything is made: a run's jobs are rows.
		return fmt.Errorf("%w: nodes: %d nodes asked for, the most a run may have is %d (berth server --max-nodes-per-run; Slurm: Node count specification invalid)",
			ErrInvalid, n, s.cfg.MaxNodesPerRun)
	}
	q, err := s.Rules().QOSOf(t.QOS)
	if err != nil {
		return fmt.Errorf("%w: qos: %v", ErrInvalid, err)
	}
	t.QOS = q
	return s.admitService(t) // gateway_limits.go
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, u *store.User) {
	// A volume's delete waits for submissions that may mount it (volumes.go).
	s.vols.admit.RLock()
	defer s.vols.admit.RUnlock()
	req, err := s.readSubmit(r, u)
	if err != nil {
		writeError(w, err)
		return
	}
	t := req.Spec
	if t.Nice < 0 && !u.Admin {
		// A negative nice raises the run above others' (Slurm's wording).
		writeError(w, fmt.Errorf("%w: nice %d: only an administrator may set a negative nice (Slurm: Access/permission denied)", ErrForbidden, t.Nice))
		return
	}
	if err := s.checkArchives(r, t); err != nil {
		writeError(w, err)
		return
	}
	if t.IsService() {
		s.handleServiceSubmit(w, r, u, t) // services.go
		return
	}
	seen, err := s.resolveDeps(r.Context(), u, t)
	if err != nil {
		writeError(w, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 || strings.ContainsFunc(key, func(c rune) bool { return c < ' ' || c > '~' }) {
		writeError(w, fmt.Errorf("%w: Idempotency-Key: at most 255 printable ASCII characters", ErrInvalid))
		return
	}
	run, err := s.submit(u, t, seen, control.SubmitOpts{Hold: req.Hold, Begin: req.Begin, Key: key, UniqueName: req.UniqueName})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, run)
}

// supported are the configuration fields this version acts on; the plan
// names every other field that is set, so nobody is misled.
var supported = map[string]bool{
	"type": true, "name": true, "commands": true, "env": true, "resources.cpu": true, "resources.memory": true,
	"resources.gpu": true, "max_duration": true, "working_dir": true, "priority": true, "nodes": true, "fleets": true,
	"qos": true, "project": true, "nice": true, "exclusive": true, "stop_duration": true,
	"array": true, "depends_on": true, "dependency_policy": true, "singleton": true, "kill_invalid_depend": true, "schedule": true, "groups": true,
	"image": true, "registry_auth": true, "shell": true, "user": true, "privileged": true, "volumes": true, "ports": true,
	"resources.shm_size": true, "signal": true, "startup_order": true, "stop_criteria": true, "dstack": true,
	"ide": true, "init": true, "inactivity_duration": true, // dev environments (spec/devenv.go)
	"port": true, "replicas": true, "scaling": true, "probes": true, "auth": true, "strip_prefix": true, "model": true, // services.go, gateway.go
	"rate_limits": true, "https": true, // gateway_limits.go
	"utilization_policy": true, // utilization.go
	"retry":              true, "repos": true, "files": true,
}

func (s *Server) handlePlan(w http.ResponseWriter, r *http.Request, u *store.User) {
	t, err := s.readSpec(r, u)
	if err != nil {
		writeError(w, err)
		return
	}
	// A node of a fleet a project owns serves that project's runs only.
	_, project, err := s.projectFor(r.Context(), u, t.Project)
	if err != nil {
		writeError(w, err)
		return
	}
	p := s.plan(t, project)
	if p.Active, err = s.activeOfName(r.Context(), u, t); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// plan answers where t would run: each node, whether it fits now, later or never.
func (s *Server) plan(t *spec.Task, project string) *api.Plan {
	s.mu.Lock()
	req, held, nodes, engines := s.Cluster.Plan(t, project)
	states := map[string]api.Node{}
	for _, n := range s.Nodes() {
		states[n.Name] = n
	}
	limits := s.Cluster.NodeLimits()
	s.unlock()
	noEngine := map[string][]string{} // an engine's error → the nodes that gave it
	p := &api.Plan{Name: t.Name, Resources: t.Resources.String(), Nodes: max(t.Nodes, 1), Allocated: allocatedText(req)}
	p.Unsupported = unsupportedFields(t) // plan_fields.go
	for i := range nodes {
		now, ever, why := sched.FitsNode(&nodes[i], req)
		row := api.PlanRow{Node: nodes[i].Name, Resources: nodeResources(&nodes[i]), Fits: "never", Why: why}
		if req.Containers && !nodes[i].Containers {
			// The engine's error (Docker's is long) is said once, below
			// the table, for all the nodes that gave it.
			row.Why = "no container engine"
			if e := engines[nodes[i].Name]; e != "" {
				noEngine[e] = append(noEngine[e], nodes[i].Name)
				row.Why += " (below)"
			}
		}
		if why == offlineWhy {
			row.Why = nodeAway(states[nodes[i].Name])
		}
		if why := diskNote(t, limits[nodes[i].Name]); why != "" && row.Why == "" { // plan_fields.go
			row.Why = why
		}
		if why := runtimeWhy(t, states[nodes[i].Name]); why != "" && !now { // plan_fields.go
			row.Why = why
		}
		if slices.Contains(req.NotFleets, nodes[i].Fleet) || held {
			row.Why = "max_duration is over the fleet's time limit (PartitionTimeLimit)"
		}
		switch {
		case now:
			row.Fits = "now"
		case ever:
			row.Fits = "later"
		}
		p.Rows = append(p.Rows, row)
	}
	p.FitsNow = sched.Fits(nodes, req, p.Nodes, true)
	p.Notes = append(p.Notes, runtimeNotes(t, slices.Collect(maps.Values(states)))...) // plan_fields.go
	for _, e := range slices.Sorted(maps.Keys(noEngine)) {
		p.Notes = append(p.Notes, fmt.Sprintf("no container engine on %s: %s", strings.Join(noEngine[e], ", "), e))
	}
	if !p.FitsNow {
		p.Offers = s.planOffers(req) // cloud.go
	}
	p.Notes = append(p.Notes, s.volumeNotes(t)...)       // volumes.go
	p.Notes = append(p.Notes, instanceVolumeNotes(t)...) // volumes_instance.go
	return p
}

func nodeResources(n *sched.Node) string {
	s := fmt.Sprintf("%d/%d CPU, %s/%s", n.FreeCPUs, n.CPUs, spec.Bytes(n.FreeMemory).Approx(), spec.Bytes(n.Memory).Approx())
	if len(n.GPUs) > 0 {
		s += fmt.Sprintf(", %d/%d GPU (%s)", len(n.FreeGPUs), len(n.GPUs), n.GPUs[0].Name)
	}
	return s
}

// handleListRuns lists runs, newest first: active ones, or with all=1
// every one, narrowed by ids (runs and the tasks of arrays among them),
// user, project and status (comma-separated), since and until (RFC 3339: runs not
// final before since, submitted before until: sacct's window) and limit;
// jobs=1 adds their jobs (one query for all), spec=1 their configuration.
func (s *Server) handleListRuns(w http.ResponseWriter, r *http.Request, u *store.User) {
	q := r.URL.Query()
	f, err := s.runFilter(q)
	if err == nil {
		err = s.visibleTo(r.Context(), u, &f, q.Get("project"))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// Streamed a page at a time, so that no listing holds the whole table
	// (and its JSON) in memory, however long the history.
	want, sent := f.Limit, 0
	for page := 0; ; page++ {
		f.Limit = s.cfg.ListPage
		if want > 0 {
			f.Limit = min(s.cfg.ListPage, want-sent)
		}
		runs, err := s.store.ListRuns(r.Context(), f)
		if err != nil {
			if page == 0 {
				writeError(w, err)
			} else {
				s.log.Warn("listing cut short", "err", err) // the client sees JSON that does not end
			}
			return
		}
		if page == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("["))
		}
		out, err := s.listPage(r, runs, q.Get("jobs") == "1", q.Get("spec") == "1")
		if q.Get("lean") == "1" {
			leanSpecs(out)
		}
		if err != nil {
			s.log.Warn("listing cut short", "err", err)
			return
		}
		for i, o := range out {
			if sent+i > 0 {
				w.Write([]byte(","))
			}
			body, _ := json.Marshal(o)
			if _, err := w.Write(body); err != nil {
				return // the client has gone
			}
		}
		sent += len(runs)
		if len(runs) < f.Limit || want > 0 && sent >= want {
			break
		}
		f.BeforeID = runs[len(runs)-1].ID
	}
	w.Write([]byte("]\n"))
}

// listPage is one page of a listing as the API shows it: with their jobs
// (one query for the page) and configurations when asked, and what the last
// pass said the waiting ones wait for.
func (s *Server) listPage(r *http.Request, runs []*store.Run, withJobs, withSpecs bool) ([]*api.Run, error) {
	jobsOf := map[int64][]*store.Job{}
	if withJobs && len(runs) > 0 {
		ids := make([]int64, len(runs))
		for i, run := range runs {
			ids[i] = run.ID
		}
		jobs, err := s.store.ListJobsOf(r.Context(), ids)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			jobsOf[j.RunID] = append(jobsOf[j.RunID], j)
		}
	}
	// What the cluster holds of the waiting runs, under one turn of the
	// lock: their jobs when never placed, and whom they wait behind.
	blocked := map[int64][]int64{}
	s.mu.Lock()
	for _, run := range runs {
		if withJobs {
			jobsOf[run.ID] = s.withUnmadeLocked(run, jobsOf[run.ID])
		}
		blocked[run.ID], _ = s.BlockedBy(run.ID)
	}
	s.unlock()
	out := make([]*api.Run, len(runs))
	for i, run := range runs {
		// The configuration is decoded once, for the resources apiRun
		// shows and for spec=1: the Slurm commands show what only it holds
		// (time limit, partitions, QOS, the Slurm options in its tags) for
		// every run at once, without one request per run.
		t := &spec.Task{}
		if json.Unmarshal(run.Spec, t) != nil {
			t = nil
		}
		out[i] = s.apiRun(run, jobsOf[run.ID], s.name(r.Context(), 'u', run.UserID), t)
		if withSpecs && t != nil {
			out[i].Spec = t
		}
		if out[i].Status == api.StatusSubmitted {
			out[i].BlockedBy = blocked[run.ID]
		}
	}
	return out, nil
}

// withUnmade is jobs, the stored jobs of run, or, for a run that waits and
// was never placed (its job rows are written at placement), its jobs as
// the cluster holds them.
func (s *Server) withUnmade(run *store.Run, jobs []*store.Job) []*store.Job {
	s.mu.Lock()
	defer s.unlock()
	return s.withUnmadeLocked(run, jobs)
}

// withUnmadeLocked is withUnmade with s.mu held.
func (s *Server) withUnmadeLocked(run *store.Run, jobs []*store.Job) []*store.Job {
	if len(jobs) > 0 || api.Status(run.Status) != api.StatusSubmitted {
		return jobs
	}
	_, held, ok := s.ActiveRun(run.ID)
	if !ok {
		return jobs
	}
	for i := range held {
		jobs = append(jobs, &held[i])
	}
	return jobs
}

// runFilter reads the list's query parameters.
func (s *Server) runFilter(q url.Values) (store.RunFilter, error) {
	f := store.RunFilter{All: q.Get("all") == "1"}
	f.Limit, _ = strconv.Atoi(q.Get("limit"))
	list := func(key string) []string {
		if v := q.Get(key); v != "" {
			return strings.Split(v, ",")
		}
		return nil
	}
	for _, v := range list("ids") {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return f, fmt.Errorf("%w: ids: %q is not a run ID", ErrInvalid, v)
		}
		f.IDs = append(f.IDs, id)
	}
	f.Users, f.Statuses = list("user"), list("status")
	for _, p := range []struct {
		key string
		to  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.key); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, fmt.Errorf("%w: %s: %q: want an RFC 3339 time", ErrInvalid, p.key, v)
			}
			*p.to = t
		}
	}
	return f, nil
}

// findRun resolves a run by ID or by name (the active run of that name
// that u sees, else the newest) for u: a run u may not see is not found, with the same
// answer as a run that does not exist (nil u: any run, for the server's
// own use).
func (s *Server) findRun(ctx context.Context, u *store.User, ref string) (*store.Run, error) {
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		if run, err := s.store.GetRun(ctx, id); err == nil && s.sees(u, run) {
			return run, nil
		}
	}
	run, err := s.findNamed(ctx, u, ref)
	if errors.Is(err, store.ErrNotFound) {
		// ARRAYID_INDEX, as Slurm names array tasks.
		if array, index, ok := s.arrayTaskRef(ctx, u, ref); ok {
			if task, err := s.store.FindArrayTask(ctx, array, index); err == nil {
				return task, nil
			}
		}
		if _, perr := strconv.ParseInt(ref, 10, 64); perr == nil {
			return nil, fmt.Errorf("run %s: %w", ref, store.ErrNotFound)
		}
	}
	return run, err
}

// sees is seesRun, where a nil user is the server itself.
func (s *Server) sees(u *store.User, run *store.Run) bool {
	return u == nil || s.seesRun(u, run)
}

// findNamed is the run named name that u sees, in the projects u reads
// (every project: an admin, or the server itself): an active one before a
// finished one (findNamedIn), else the newest.
func (s *Server) findNamed(ctx context.Context, u *store.User, name string) (*store.Run, error) {
	return s.findNamedIn(ctx, u, name, false)
}

// findNamedIn is findNamed; activeOnly leaves out finished runs.
func (s *Server) findNamedIn(ctx context.Context, u *store.User, name string, activeOnly bool) (*store.Run, error) {
	var projects []int64
	if u == nil || u.Admin {
		ps, err := s.store.ListProjects(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			projects = append(projects, p.ID)
		}
	} else {
		for id := range s.rolesOf(ctx, u) {
			projects = append(projects, id)
		}
	}
	var best *store.Run
	bestActive := false
	for _, pid := range projects {
		run, err := s.store.FindActiveRun(ctx, pid, name)
		active := err == nil
		if errors.Is(err, store.ErrNotFound) && !activeOnly {
			run, err = s.store.FindRun(ctx, pid, name)
		}
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !s.sees(u, run) {
			continue
		}
		if best == nil || active && !bestActive || active == bestActive && run.ID > best.ID {
			best, bestActive = run, active
		}
	}
	if best == nil {
		return nil, fmt.Errorf("run %q: %w", name, store.ErrNotFound)
	}
	return best, nil
}

// arrayTaskRef reads ARRAYID_INDEX or NAME_INDEX where the array exists
// and u sees it.
func (s *Server) arrayTaskRef(ctx context.Context, u *store.User, ref string) (int64, int, bool) {
	m := control.TaskRef().FindStringSubmatch(ref)
	if m == nil {
		return 0, 0, false
	}
	index, _ := strconv.Atoi(m[2])
	var array *store.Run
	var err error
	if id, perr := strconv.ParseInt(m[1], 10, 64); perr == nil {
		array, err = s.store.GetRun(ctx, id)
		if err == nil && !s.sees(u, array) {
			err = store.ErrNotFound
		}
	} else {
		array, err = s.findNamed(ctx, u, m[1])
	}
	if err != nil || !control.IsArrayRun(array) {
		return 0, 0, false
	}
	return array.ID, index, true
}

// cancelTask stops task index of an array before it exists.
func (s *Server) cancelTask(array int64, index int) error {
	_, err := s.do(control.CancelTaskInput{Array: array, Index: index})
	return err
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, err := s.findRun(r.Context(), u, r.PathValue("ref"))
	if err != nil {
		writeError(w, err)
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), run.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	jobs = s.withUnmade(run, jobs)
	var t spec.Task
	if err := json.Unmarshal(run.Spec, &t); err != nil {
		writeError(w, fmt.Errorf("server: run %d: %w", run.ID, err))
		return
	}
	events, err := s.store.ListEvents(r.Context(), run.ID)
	if err != nil {
		writeError(w, err)
		return
	}
	out := s.withBlockedBy(s.apiRun(run, jobs, s.name(r.Context(), 'u', run.UserID), &t))
	out.Spec = &t
	for _, e := range events {
		out.Events = append(out.Events, api.Event{Time: e.Time, JobID: e.JobID, Type: e.Type, Message: e.Message})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleStop(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.StopRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	ref := r.PathValue("ref")
	// By name, the active run (findRun prefers it): `stop NAME` of a
	// scheduled configuration stops the schedule, not the last run it
	// fired; a name whose runs all ended answers the last, unchanged.
	run, err := s.findRun(r.Context(), u, ref)
	if errors.Is(err, store.ErrNotFound) {
		// A task of an array that does not exist yet: it never will.
		if array, index, ok := s.arrayTaskRef(r.Context(), u, ref); ok {
			parent, err := s.store.GetRun(r.Context(), array)
			if err == nil {
				err = s.mayChange(u, parent)
			}
			if err == nil {
				err = s.cancelTask(array, index)
			}
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, &api.Run{ID: array, Name: ref, Status: api.StatusTerminated, Reason: api.ReasonTerminatedByUser})
			return
		}
	}
	if err == nil {
		err = s.mayChange(u, run)
	}
	if err == nil && isServiceRun(run) && !lifecycle.Status(run.Status).Finished() {
		// By name: the whole service (services.go); by ID: that replica,
		// drained, which the service replaces.
		if ref != strconv.FormatInt(run.ID, 10) {
			err = s.stopService(r.Context(), run)
		} else {
			s.stopReplica(run)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.stop(run.ID, req.Abort); err != nil {
		writeError(w, err)
		return
	}
	if run, err = s.store.GetRun(r.Context(), run.ID); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.apiRun(run, nil, s.name(r.Context(), 'u', run.UserID), nil))
}

func (s *Server) handleNodes(w http.ResponseWriter, r *http.Request, _ *store.User) {
	s.mu.Lock()
	out := s.Nodes()
	s.unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request, _ *store.User) {
	s.mu.Lock()
	wt := s.cfg.Weights
	unkillable := s.cfg.UnkillableTimeout
	if unkillable == 0 {
		unkillable = time.Minute // control's default
	}
	st := api.ServerStatus{MaxScriptBytes: s.cfg.MaxScriptBytes, Config: &api.ServerConfig{
		Policy: s.cfg.Policy.String(), Depth: s.cfg.Depth, StopGrace: s.cfg.StopGrace.Seconds(),
		UnkillableTimeout: unkillable.Seconds(), NodeTimeout: s.cfg.NodeTimeout.Seconds(),
		MaxArraySize: s.cfg.MaxArraySize, MaxNodesPerRun: s.cfg.MaxNodesPerRun, FairshareHalfLife: s.cfg.HalfLife.Seconds(),
		Weights: &api.Weights{Age: wt.Age, Fairshare: wt.Fairshare, JobSize: wt.Size, QOS: wt.QOS, Partition: wt.Partition,
			Own: wt.Priority, Expansion: wt.Expansion, MaxAge: wt.MaxAge.Seconds(), FavorSmall: wt.FavorSmall},
	}}
	st.ActiveRuns, st.PendingRuns, _, st.Nodes = s.Counts()
	s.unlock()
	st.Commits, st.Batches, st.Passes = s.metrics.commits.Load(), s.metrics.batches.Load(), s.metrics.cycles.Load()
	heap := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(heap)
	st.HeapLive, st.HeapGoal = int64(heap[0].Value.Uint64()), int64(heap[1].Value.Uint64())
	writeJSON(w, http.StatusOK, st)
}

// handlePriorities lists every pending run's priority factors, highest
// first; ids=1,2,… only those runs' (squeue -j asks for its jobs only).
func (s *Server) handlePriorities(w http.ResponseWriter, r *http.Request, u *store.User) {
	var ids []int64
	if v := r.URL.Query().Get("ids"); v != "" {
		for _, x := range strings.Split(v, ",") {
			id, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				writeError(w, fmt.Errorf("%w: ids: %q is not a run ID", ErrInvalid, x))
				return
			}
			ids = append(ids, id)
		}
	}
	now := s.clock.Now()
	var (
		factors map[int64]sched.Factors
		names   map[int64][2]string
		snap    sched.Snapshot
	)
	s.mu.Lock()
	cheap := false
	if ids != nil {
		factors, names, cheap = s.PrioritiesOf(now, ids)
	}
	if !cheap {
		snap, names = s.Priorities(now)
	}
	owners := make(map[int64]store.Run, len(names))
	for id := range names {
		if rec, _, ok := s.ActiveRun(id); ok {
			owners[id] = rec
		}
	}
	s.unlock()
	if !cheap {
		factors = sched.Priorities(snap, now) // outside the lock: it reads its own copy
		if ids != nil {
			want := make(map[int64]bool, len(ids))
			for _, id := range ids {
				want[id] = true
			}
			for id := range factors {
				if !want[id] {
					delete(factors, id)
				}
			}
		}
	}
	wt := s.cfg.Weights
	out := []api.RunPriority{}
	for id, f := range factors {
		if rec, ok := owners[id]; u != nil && !u.Admin && (!ok || !s.seesRun(u, &rec)) {
			continue // a run the caller may not see is not listed
		}
		out = append(out, api.RunPriority{RunID: id, Name: names[id][0], User: names[id][1], Priority: f.Total,
			Age: weighted(wt.Age, f.Age), Fairshare: weighted(wt.Fairshare, f.Fairshare), JobSize: weighted(wt.Size, f.Size),
			QOS: weighted(wt.QOS, f.QOS), Partition: weighted(wt.Partition, f.Partition), Expansion: weighted(wt.Expansion, f.Expansion), Own: weighted(wt.Priority, f.Priority), Nice: f.Nice})
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Priority != out[k].Priority {
			return out[i].Priority > out[k].Priority
		}
		return out[i].RunID < out[k].RunID
	})
	writeJSON(w, http.StatusOK, out)
}

func weighted(w int64, f float64) int64 { return int64(math.Round(float64(w) * f)) }

// withBlockedBy adds what the last scheduling pass said a waiting run waits
// for (memory only: it is derived, not state). Do not hold s.mu.
func (s *Server) withBlockedBy(out *api.Run) *api.Run {
	if out.Status == api.StatusSubmitted {
		s.mu.Lock()
		out.BlockedBy, _ = s.BlockedBy(out.ID)
		s.unlock()
	}
	return out
}

// apiRun is a run as the API shows it; t is its configuration when the
// caller has it decoded already (else it is read from r.Spec).
func (s *Server) apiRun(r *store.Run, jobs []*store.Job, user string, t *spec.Task) *api.Run {
	out := &api.Run{ID: r.ID, Name: r.Name, Project: s.name(context.Background(), 'p', r.ProjectID), User: user, Status: api.Status(r.Status), Reason: r.Reason,
		ExitCode: r.ExitCode, Priority: r.Priority, SubmittedAt: r.SubmittedAt, StartedAt: timePtr(r.StartedAt), FinishedAt: timePtr(r.FinishedAt),
		EstimatedStart: timePtr(r.EstimatedStart)}
	out.Reason = s.provisioningReason(r.ID, out.Reason) // cloud.go
	if t == nil {
		t = &spec.Task{}
		if json.Unmarshal(r.Spec, t) != nil {
			t = nil
		}
	}
	if t != nil {
		out.Resources = t.Resources.String()
		out.Reason = s.volumeReason(t, out.Project, out.Reason) // volumes.go
	}
	if r.ArrayID != 0 {
		out.ArrayID = r.ArrayID
		idx := r.ArrayIndex
		out.ArrayIndex = &idx
	} else if t != nil && t.Array != "" {
		if a, err := s.store.GetArray(context.Background(), r.ID); err == nil {
			out.Array = control.ArrayInfo(a)
		}
	}

	for _, j := range jobs {
		var alloc api.Alloc
		_ = json.Unmarshal(j.Alloc, &alloc)
		out.Jobs = append(out.Jobs, api.Job{ID: j.ID, RunID: j.RunID, Num: j.Num, Attempt: j.Attempt, Status: api.Status(j.Status),
			Reason: j.Reason, ExitCode: j.ExitCode, Node: j.Node, Alloc: alloc, SubmittedAt: j.SubmittedAt,
			StartedAt: timePtr(j.StartedAt), FinishedAt: timePtr(j.FinishedAt), LogSize: j.LogSize, MaxRSS: j.MaxRSS, Usage: jobUsage(j.Usage)})
		if j.Node != "" {
			out.Nodes = append(out.Nodes, j.Node)
		}
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// allocatedText says what one job of r is given: its limits.
func allocatedText(r sched.Request) string {
	out := fmt.Sprintf("%d CPU", r.CPUs)
	if r.Memory > 0 {
		out += ", " + spec.Bytes(r.Memory).Approx() + " memory"
	} else {
		out += ", no memory limit"
	}
	if r.GPU.Count > 0 {
		out += fmt.Sprintf(", %d GPU", r.GPU.Count)
	}
	if r.Exclusive {
		out += " (the whole node)"
	}
	return out + " per job"
}
