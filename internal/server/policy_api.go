package server

import (
	"net/http"
	"sort"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/store"
)

// handlePolicy shows the scheduling rules in force (what sacctmgr show qos
// and show assoc print).
func (s *Server) handlePolicy(w http.ResponseWriter, _ *http.Request, _ *store.User) {
	rules := s.Rules()
	out := api.PolicyInfo{DefaultQOS: rules.DefaultQOS}
	limits := func(k sched.LimitKey) *api.LimitInfo {
		l, ok := rules.Limits[k]
		sub, hasSub := rules.Submit[k]
		if !ok && !hasSub {
			return nil
		}
		li := &api.LimitInfo{Jobs: l.Jobs, Submit: sub, CPUs: l.TRES.CPUs, Memory: int64(l.TRES.Memory), GPUs: l.TRES.GPUs,
			GPUTypes: l.TRES.GPUTypes, WallSeconds: int64(l.Wall.Seconds())}
		return li
	}
	for name, q := range rules.QOS {
		out.QOS = append(out.QOS, api.QOSInfo{Name: name, Priority: q.Priority, Preempt: q.Preempt, PreemptMode: q.Mode.String(),
			Limits: limits(sched.LimitKey{Scope: sched.ScopeQOS, Name: name}), UserLimits: limits(sched.LimitKey{Scope: sched.ScopeQOSUser, Name: name})})
	}
	sort.Slice(out.QOS, func(i, k int) bool { return out.QOS[i].Name < out.QOS[k].Name })
	seen := map[string]bool{}
	add := func(kind, project, user string, shares int, l *api.LimitInfo) {
		key := kind + "\x00" + project + "\x00" + user
		if seen[key] {
			return
		}
		seen[key] = true
		out.Associations = append(out.Associations, api.AssocInfo{Project: project, User: user, Shares: shares, Limits: l})
	}
	if sh := rules.Shares; sh != nil {
		for p, n := range sh.Projects {
			add("p", p, "", n, limits(sched.LimitKey{Scope: sched.ScopeProject, Name: p}))
		}
		for p, users := range sh.Users {
			for u, n := range users {
				add("u", p, u, n, limits(sched.ProjectUserKey(p, u)))
			}
		}
	}
	for k := range rules.Limits {
		switch k.Scope {
		case sched.ScopeProject:
			add("p", k.Name, "", 1, limits(k))
		case sched.ScopeUser:
			add("U", "", k.Name, 0, limits(k))
		case sched.ScopeProjectUser: // a user's association; a project's user_limits have no line
			if p, u, ok := strings.Cut(k.Name, "\x00"); ok {
				add("u", p, u, 1, limits(k))
			}
		}
	}
	sort.Slice(out.Associations, func(i, k int) bool {
		a, b := out.Associations[i], out.Associations[k]
		return strings.Compare(a.Project+"\x00"+a.User, b.Project+"\x00"+b.User) < 0
	})
	for name, f := range rules.Fleets {
		out.Fleets = append(out.Fleets, api.FleetInfo{Name: name, Partitions: f.Partitions, Tier: f.Tier, Blocks: f.Blocks, MaxWallSeconds: int64(f.MaxWall.Seconds())})
	}
	sort.Slice(out.Fleets, func(i, k int) bool { return out.Fleets[i].Name < out.Fleets[k].Name })
	for name := range rules.Down {
		out.DownPartitions = append(out.DownPartitions, name)
	}
	sort.Strings(out.DownPartitions)
	writeJSON(w, http.StatusOK, out)
}
