package web

import (
	"bytes"
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// nodeView is one node of the fleets page.
type nodeView struct {
	api.Node
	Drained         bool
	CPUPct, MemPct  float64
	GPUCells        []gpuCell
	Health, HealthC string
}

// gpuCell is one GPU of a node: allocated or free.
type gpuCell struct {
	Index int
	Name  string
	Used  bool
}

// fleetView is a fleet's nodes.
type fleetView struct {
	Name  string
	Nodes []nodeView
}

// fleets reads the nodes and, to tell which GPUs are allocated, the active
// runs' jobs.
func fleets(ctx context.Context, c *client.Client) ([]fleetView, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]map[int]bool{}
	err = c.EachRun(ctx, client.ListOptions{Jobs: true}, func(r *api.Run) error {
		for _, j := range r.Jobs {
			for _, g := range j.Alloc.GPUs {
				if used[j.Node] == nil {
					used[j.Node] = map[int]bool{}
				}
				if !isFinal(string(j.Status)) {
					used[j.Node][g] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	byFleet := map[string]*fleetView{}
	var names []string
	for _, n := range nodes {
		v := nodeView{Node: n, Drained: n.Drain != nil, CPUPct: pct(float64(n.AllocCPUs), float64(n.CPUs)),
			MemPct: pct(float64(n.AllocMemory), float64(n.Memory)), Health: "unknown", HealthC: "muted"}
		if h := n.Health; h != nil {
			v.Health, v.HealthC = h.Status, h.Status
			if h.Reason != "" {
				v.Health += ": " + h.Reason
			}
		}
		// The API counts a node's allocated GPUs; the jobs say which.
		// Without them (a job not listed yet) the first ones are shown.
		k := 0
		for _, g := range n.GPUs {
			if used[n.Name][g.Index] {
				k++
			}
		}
		for _, g := range n.GPUs {
			u := used[n.Name][g.Index]
			if !u && k < n.AllocGPUs {
				u = true
				k++
			}
			v.GPUCells = append(v.GPUCells, gpuCell{Index: g.Index, Name: g.Name, Used: u})
		}
		fleet := n.Fleet
		if fleet == "" {
			fleet = "(no fleet)"
		}
		fv, ok := byFleet[fleet]
		if !ok {
			fv = &fleetView{Name: fleet}
			byFleet[fleet] = fv
			names = append(names, fleet)
		}
		fv.Nodes = append(fv.Nodes, v)
	}
	sort.Strings(names)
	out := make([]fleetView, len(names))
	for i, name := range names {
		out[i] = *byFleet[name]
		sort.Slice(out[i].Nodes, func(a, b int) bool { return out[i].Nodes[a].Name < out[i].Nodes[b].Name })
	}
	return out, nil
}

// backendView is one backend fleet of the fleets page (a `type: fleet`
// file with nodes:, as `berth fleet` lists them under BACKEND FLEET).
type backendView struct {
	Name, Project, Status string
	Min, Target, Max      string
	// Instances counts the live instances, and says how many are in each
	// state ("2: 1 active, 1 creating").
	Instances string
	LastError string // the last failed creation ("" none)
	RetryAt   string
}

// backendFleets are the backend fleets the user may read.
func backendFleets(ctx context.Context, c *client.Client) ([]backendView, error) {
	fs, err := c.Fleets(ctx)
	if err != nil {
		return nil, err
	}
	var out []backendView
	for _, f := range fs {
		if f.Spec == nil || f.Spec.Nodes == nil {
			continue
		}
		n := f.Spec.Nodes
		v := backendView{Name: f.Name, Project: f.Project, Status: f.Status, Min: strconv.Itoa(n.Min), Target: strconv.Itoa(n.Target), Max: "-"}
		if n.Max != nil {
			v.Max = strconv.Itoa(*n.Max)
		}
		states := map[string]int{}
		var order []string
		for _, in := range f.Instances {
			if states[in.State] == 0 {
				order = append(order, in.State)
			}
			states[in.State]++
		}
		v.Instances = strconv.Itoa(len(f.Instances))
		for i, st := range order {
			sep := ", "
			if i == 0 {
				sep = ": "
			}
			v.Instances += sep + strconv.Itoa(states[st]) + " " + st
		}
		if e := f.LastError; e != nil {
			v.LastError, v.RetryAt = e.Message, e.RetryAt.Local().Format(time.TimeOnly)
		}
		out = append(out, v)
	}
	return out, nil
}

func (u *UI) fleetsPage(w http.ResponseWriter, r *http.Request, s *session) {
	fs, err := fleets(r.Context(), s.c)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	bs, err := backendFleets(r.Context(), s.c)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "fleets", map[string]any{"Who": s.who, "Fleets": fs, "Backends": bs, "Err": r.URL.Query().Get("err")})
}

// fleetsEvents streams each node's state (event node-NAME). A node that
// joins or leaves shows at the next load of the page.
func (u *UI) fleetsEvents(w http.ResponseWriter, r *http.Request, s *session) {
	u.stream(w, r, func() ([]sseEvent, error) {
		fs, err := fleets(r.Context(), s.c)
		if err != nil {
			return nil, err
		}
		var out []sseEvent
		for _, f := range fs {
			for _, n := range f.Nodes {
				var b bytes.Buffer
				if err := u.pages["fleets"].ExecuteTemplate(&b, "node", n); err != nil {
					return nil, err
				}
				out = append(out, sseEvent{"node-" + n.Name, b.String()})
			}
		}
		return out, nil
	})
}

// drain drains a node through the API (an administrator's right).
func (u *UI) drain(w http.ResponseWriter, r *http.Request, s *session) {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		reason = "drained from the dashboard by " + s.who.User
	}
	_, err := s.c.Drain(r.Context(), r.PathValue("name"), reason)
	u.back(w, r, Prefix+"fleets", err)
}

func (u *UI) resume(w http.ResponseWriter, r *http.Request, s *session) {
	_, err := s.c.Resume(r.Context(), r.PathValue("name"))
	u.back(w, r, Prefix+"fleets", err)
}
