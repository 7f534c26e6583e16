package web

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// queueRow is a pending run in the scheduler's order with its factors.
type queueRow struct {
	api.RunPriority
	Run *runRow
}

func (u *UI) queuePage(w http.ResponseWriter, r *http.Request, s *session) {
	prios, err := s.c.Priorities(r.Context())
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	// Active runs with their jobs and configurations: the pending ones'
	// reasons and estimated starts, the running ones' nodes and limits.
	var active []*api.Run
	err = s.c.EachRun(r.Context(), client.ListOptions{Jobs: true, Spec: true}, func(run *api.Run) error {
		active = append(active, run)
		return nil
	})
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	byID := map[int64]*api.Run{}
	for _, run := range active {
		byID[run.ID] = run
	}
	rows := make([]queueRow, len(prios))
	for i, p := range prios {
		rows[i] = queueRow{RunPriority: p}
		if run, ok := byID[p.RunID]; ok {
			row := rowOf(run)
			rows[i].Run = &row
		}
	}
	u.render(w, r, http.StatusOK, "queue", map[string]any{"Who": s.who, "Rows": rows, "Gantt": gantt(active, time.Now())})
}

// bar is one allocation or reservation on the plan's picture.
type bar struct {
	lane     string
	from, to time.Time
	open     bool // no time limit: drawn to the picture's end
	run      int64
	name     string
	reserved bool
}

// gantt draws the backfill plan as the runs tell it: each node's running
// jobs from their start to their time limit, and each waiting run with an
// estimated start from then for its time limit (the scheduler reserves
// for it; its nodes are chosen when it starts).
func gantt(runs []*api.Run, now time.Time) template.HTML {
	var bars []bar
	var lanes []string
	seen := map[string]bool{}
	lane := func(name string) {
		if !seen[name] {
			seen[name] = true
			lanes = append(lanes, name)
		}
	}
	end := now.Add(time.Hour)
	limit := func(r *api.Run) (time.Duration, bool) {
		if r.Spec != nil && r.Spec.MaxDuration != nil && *r.Spec.MaxDuration > 0 {
			return time.Duration(*r.Spec.MaxDuration) * time.Second, true
		}
		return 0, false
	}
	for _, r := range runs {
		d, ok := limit(r)
		for _, j := range r.Jobs {
			if j.Node == "" || j.StartedAt == nil || isFinal(string(j.Status)) {
				continue
			}
			lane(j.Node)
			b := bar{lane: j.Node, from: *j.StartedAt, run: r.ID, name: r.Name, open: !ok}
			if ok {
				b.to = j.StartedAt.Add(d)
				end = maxTime(end, b.to)
			}
			bars = append(bars, b)
		}
	}
	for _, r := range runs {
		if r.EstimatedStart == nil || r.StartedAt != nil {
			continue
		}
		name := fmt.Sprintf("reserved: %s (%d)", r.Name, r.ID)
		lane(name)
		d, ok := limit(r)
		b := bar{lane: name, from: *r.EstimatedStart, run: r.ID, name: r.Name, reserved: true, open: !ok}
		if ok {
			b.to = r.EstimatedStart.Add(d)
			end = maxTime(end, b.to)
		}
		bars = append(bars, b)
	}
	if len(bars) == 0 {
		return ""
	}
	end = minTime(end, now.Add(7*24*time.Hour))
	const w, left, laneH = 900.0, 180.0, 24.0
	h := 24 + laneH*float64(len(lanes))
	x := func(t time.Time) float64 {
		t = maxTime(now, minTime(t, end))
		return left + (w-left-5)*t.Sub(now).Seconds()/end.Sub(now).Seconds()
	}
	idx := map[string]int{}
	for i, l := range lanes {
		idx[l] = i
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" class="gantt" role="img" aria-label="%s">`, w, h,
		html.EscapeString(fmt.Sprintf("plan from %s to %s", clock(now), clock(end))))
	for i, l := range lanes {
		y := 20 + laneH*float64(i)
		fmt.Fprintf(&b, `<text x="4" y="%.0f" class="tick">%s</text>`, y+16, html.EscapeString(l))
		fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, y+laneH, w-5, y+laneH)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="14" class="tick">now</text><text x="%.0f" y="14" class="tick" text-anchor="end">%s</text>`,
		left, w-5, end.UTC().Format("01-02 15:04"))
	for _, br := range bars {
		y := 20 + laneH*float64(idx[br.lane]) + 3
		to := br.to
		if br.open {
			to = end
		}
		x0, x1 := x(br.from), x(to)
		cls := "run"
		if br.reserved {
			cls = "resv"
		}
		fmt.Fprintf(&b, `<a href="%sruns/%d"><rect class="%s" x="%.1f" y="%.0f" width="%.1f" height="%.0f"><title>%s</title></rect></a>`,
			Prefix, br.run, cls, x0, y, max(2, x1-x0), laneH-6,
			html.EscapeString(fmt.Sprintf("%s (%d) %s → %s", br.name, br.run, clock(br.from), endText(br, to))))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and escaped text only
}

func endText(b bar, to time.Time) string {
	if b.open {
		return "no time limit"
	}
	return clock(to)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
