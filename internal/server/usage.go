package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Accounting's reports: GET /usage (berth usage, sreport) sums what jobs
// used over a window by project and user; GET /fairshare (sshare) is the
// fairshare tree as the scheduler weighs it now. A user sees the rows of
// their own projects; with private data on jobs, only their own rows
// there, unless they manage the project (Slurm's PrivateData=usage).

// jobUsage reads a job's stored usage (nil: none kept).
func jobUsage(b []byte) *api.JobUsage {
	if len(b) == 0 {
		return nil
	}
	var u api.JobUsage
	if json.Unmarshal(b, &u) != nil {
		return nil
	}
	return &u
}

// handleUsage answers GET /usage?since=&until=&project=&user= (RFC 3339
// times; since defaults to a day before until, until to now).
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request, u *store.User) {
	q := r.URL.Query()
	now := s.clock.Now().UTC()
	until, since := now, time.Time{}
	for name, at := range map[string]*time.Time{"until": &until, "since": &since} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				writeError(w, fmt.Errorf("%w: %s=%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", ErrInvalid, name, v))
				return
			}
			*at = t.UTC()
		}
	}
	if since.IsZero() {
		since = until.Add(-24 * time.Hour)
	}
	if !since.Before(until) {
		writeError(w, fmt.Errorf("%w: since %s is not before until %s", ErrInvalid, since.Format(time.RFC3339), until.Format(time.RFC3339)))
		return
	}
	rep, err := s.usageReport(r, u, since, until, now, q.Get("project"), q.Get("user"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// accounted is one job's part of a window.
type accounted struct {
	runID         int64
	project, user string
	u             api.JobUsage
	start, end    time.Time
}

func (s *Server) usageReport(r *http.Request, u *store.User, since, until, now time.Time, project, user string) (*api.UsageReport, error) {
	ctx := r.Context()
	ended, err := s.store.UsageBetween(ctx, since, until)
	if err != nil {
		return nil, err
	}
	var jobs []accounted
	for _, e := range ended {
		a := accounted{runID: e.RunID, project: s.name(ctx, 'p', e.ProjectID), user: s.name(ctx, 'u', e.UserID), start: e.StartedAt, end: e.FinishedAt}
		if ku := jobUsage(e.Usage); ku != nil {
			a.u = *ku
		} else {
			var al api.Alloc
			_ = json.Unmarshal(e.Alloc, &al)
			a.u = api.JobUsage{CPUs: al.CPUs, Memory: al.Memory, GPUs: len(al.GPUs), Billing: float64(al.CPUs)}
		}
		jobs = append(jobs, a)
	}
	s.mu.Lock()
	running := s.RunningUsage(now)
	capacity := map[string]float64{}
	for _, n := range s.Nodes() {
		capacity["cpu"] += float64(n.CPUs)
		capacity["gres/gpu"] += float64(len(n.GPUs))
		capacity["mem"] += float64(n.Memory) / (1 << 20)
	}
	s.unlock()
	for _, j := range running {
		if j.Started.Before(until) {
			jobs = append(jobs, accounted{runID: j.RunID, project: j.Project, user: j.User, u: j.Usage, start: j.Started, end: now})
		}
	}
	window := until.Sub(since).Seconds()
	for k := range capacity {
		capacity[k] *= window
	}
	rep := &api.UsageReport{Since: since, Until: until, Capacity: capacity}
	type key struct{ project, user string }
	rows := map[key]*api.UsageRow{}
	runs := map[key]map[int64]bool{}
	visible := map[string]bool{}
	for _, j := range jobs {
		if project != "" && j.project != project || user != "" && j.user != user {
			continue
		}
		seen, ok := visible[j.project+"\x00"+j.user]
		if !ok {
			seen = s.seesUsage(ctx, u, j.project, j.user)
			visible[j.project+"\x00"+j.user] = seen
		}
		if !seen {
			continue
		}
		// The part of the job inside the window.
		from, to := j.start, j.end
		if from.Before(since) {
			from = since
		}
		if to.After(until) {
			to = until
		}
		secs := to.Sub(from).Seconds()
		if secs <= 0 {
			continue
		}
		part := j.u
		part.Seconds = secs
		for _, k := range []key{{j.project, ""}, {j.project, j.user}} {
			row := rows[k]
			if row == nil {
				row = &api.UsageRow{Project: k.project, User: k.user, TRESSeconds: map[string]float64{}}
				rows[k], runs[k] = row, map[int64]bool{}
			}
			row.Jobs++
			runs[k][j.runID] = true
			for name, v := range part.TRESSeconds() {
				row.TRESSeconds[name] += v
			}
		}
	}
	for k, row := range rows {
		row.Runs = len(runs[k])
		for name, v := range row.TRESSeconds {
			row.TRESSeconds[name] = math.Round(v*1000) / 1000 // sums in map order: round off their last bits
		}
		rep.Rows = append(rep.Rows, *row)
	}
	slices.SortFunc(rep.Rows, func(a, b api.UsageRow) int {
		if c := strings.Compare(a.Project, b.Project); c != 0 {
			return c
		}
		return strings.Compare(a.User, b.User)
	})
	return rep, nil
}

// seesUsage says whether u may see user's usage in project: an admin all,
// a member their projects' (with private data on jobs, their own unless
// they manage the project).
func (s *Server) seesUsage(ctx context.Context, u *store.User, project, user string) bool {
	if u == nil || u.Admin {
		return true
	}
	p, err := s.store.ProjectByName(ctx, project)
	if err != nil {
		return false
	}
	id := p.ID
	if !s.mayRead(u, id) {
		return false
	}
	return !s.privateData().Jobs || user == u.Name || s.mayManage(u, id)
}

// handleFairshare answers GET /fairshare: the tree sshare prints, the
// caller's projects only unless an admin.
func (s *Server) handleFairshare(w http.ResponseWriter, r *http.Request, u *store.User) {
	s.mu.Lock()
	rows := s.ShareTree(s.clock.Now())
	s.unlock()
	out := make([]api.ShareRow, 0, len(rows))
	for _, row := range rows {
		if row.Project != "" && !s.seesUsage(r.Context(), u, row.Project, row.User) {
			continue
		}
		out = append(out, api.ShareRow{Project: row.Project, User: row.User, RawShares: row.RawShares, NormShare: row.NormShares,
			RawUsage: row.RawUsage, NormUsage: row.NormUsage, EffUsage: row.EffectiveUsage, FairShare: row.FairShare})
	}
	writeJSON(w, http.StatusOK, out)
}

// privateData is what members do not see of each other's runs: the policy
// file's private_data when it says, else berth server --private-data.
func (s *Server) privateData() PrivateData {
	if pd := s.Rules().PrivateData; pd != nil {
		return PrivateData{Jobs: pd.Jobs, Logs: pd.Logs}
	}
	return s.cfg.PrivateData
}
