package web

import (
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// usageWindow is one of the usage page's windows: its length, and the
// buckets its charts are drawn over (one GET /usage each).
type usageWindow struct {
	Key     string
	Label   string
	Span    time.Duration
	Buckets int
}

var usageWindows = []usageWindow{
	{"day", "the last day", 24 * time.Hour, 12},
	{"week", "the last 7 days", 7 * 24 * time.Hour, 14},
	{"month", "the last 30 days", 30 * 24 * time.Hour, 15},
}

// usageRow is a line of the usage table, in hours.
type usageRow struct {
	Project, User       string
	Runs, Jobs          int
	CPUh, GPUh, Billing string
}

// usagePage shows what runs used over a window, by project and user (GET
// /usage, the rows the user may see), charted over the window's buckets,
// and the fairshare tree (GET /fairshare).
func (u *UI) usagePage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	win := usageWindows[1]
	for _, x := range usageWindows {
		if x.Key == q.Get("window") {
			win = x
		}
	}
	project := q.Get("project")
	until := time.Now().UTC()
	since := until.Add(-win.Span)
	rep, err := s.c.Usage(r.Context(), client.UsageQuery{Since: since, Until: until, Project: project})
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	var rows []usageRow
	projects := map[string]bool{}
	for _, x := range rep.Rows {
		projects[x.Project] = true
		rows = append(rows, usageRow{Project: x.Project, User: x.User, Runs: x.Runs, Jobs: x.Jobs,
			CPUh: hoursText(x.TRESSeconds["cpu"]), GPUh: hoursText(x.TRESSeconds["gres/gpu"]), Billing: hoursText(x.TRESSeconds["billing"])})
	}
	// Over time: a project's totals (or, for one project, its users') per
	// bucket, each point at its bucket's end.
	step := win.Span / time.Duration(win.Buckets)
	cpu, gpu, bill := map[string]*series{}, map[string]*series{}, map[string]*series{}
	var order []string
	for i := range win.Buckets {
		b0 := since.Add(time.Duration(i) * step)
		br, err := s.c.Usage(r.Context(), client.UsageQuery{Since: b0, Until: b0.Add(step), Project: project})
		if err != nil {
			u.apiFailure(w, r, s, err)
			return
		}
		seen := map[string]bool{}
		for _, x := range br.Rows {
			key, ok := usageKey(x, project)
			if !ok {
				continue
			}
			if cpu[key] == nil {
				cpu[key], gpu[key], bill[key] = &series{name: key}, &series{name: key}, &series{name: key}
				order = append(order, key)
				// Zero in the buckets before its first use.
				for j := range i {
					t := since.Add(time.Duration(j+1) * step)
					cpu[key].pts = append(cpu[key].pts, point{t, 0})
					gpu[key].pts = append(gpu[key].pts, point{t, 0})
					bill[key].pts = append(bill[key].pts, point{t, 0})
				}
			}
			seen[key] = true
			t := b0.Add(step)
			cpu[key].pts = append(cpu[key].pts, point{t, x.TRESSeconds["cpu"] / 3600})
			gpu[key].pts = append(gpu[key].pts, point{t, x.TRESSeconds["gres/gpu"] / 3600})
			bill[key].pts = append(bill[key].pts, point{t, x.TRESSeconds["billing"] / 3600})
		}
		for _, key := range order {
			if !seen[key] {
				t := b0.Add(step)
				cpu[key].pts = append(cpu[key].pts, point{t, 0})
				gpu[key].pts = append(gpu[key].pts, point{t, 0})
				bill[key].pts = append(bill[key].pts, point{t, 0})
			}
		}
	}
	list := func(m map[string]*series) []series {
		out := make([]series, len(order))
		for i, k := range order {
			out[i] = *m[k]
		}
		return out
	}
	per := fmt.Sprintf(" per %s", durationText(step))
	h := func(v float64) string { return fmt.Sprintf("%.3g h", v) } // small uses stay readable
	charts := []chart{
		{Title: "CPU-hours" + per, SVG: lineChart(list(cpu), 0, h)},
		{Title: "GPU-hours" + per, SVG: lineChart(list(gpu), 0, h)},
		{Title: "Billing" + per, SVG: lineChart(list(bill), 0, h)},
	}
	share, err := s.c.Fairshare(r.Context())
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	projectList, err := s.c.Projects(r.Context(), false)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "usage", map[string]any{"Who": s.who, "Windows": usageWindows, "Window": win,
		"Project": project, "Projects": projectList, "Since": rep.Since, "Until": rep.Until, "Rows": rows,
		"Charts": charts, "Share": share, "Empty": len(order) == 0})
}

// usageKey names a row's series: a project's total (no project chosen),
// or one user's within the chosen project.
func usageKey(x api.UsageRow, project string) (string, bool) {
	if project == "" {
		return x.Project, x.User == ""
	}
	return x.User, x.User != "" && x.Project == project
}

func hoursText(sec float64) string { return fmt.Sprintf("%.2f", sec/3600) }

func durationText(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		if d == 24*time.Hour {
			return "day"
		}
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	if d == time.Hour {
		return "hour"
	}
	return fmt.Sprintf("%d hours", d/time.Hour)
}

// shareFmt prints a fairshare figure as sshare does.
func shareFmt(v float64) template.HTML { return template.HTML(fmt.Sprintf("%.6f", v)) }
