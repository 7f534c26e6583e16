package web

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// chart is one of a run's charts, drawn server-side as SVG.
type chart struct {
	Title string
	SVG   template.HTML // empty: no samples
}

type point struct {
	t time.Time
	v float64
}

type series struct {
	name string
	pts  []point
}

// charts draws a run's CPU, memory and GPU use from its jobs' samples.
func charts(m *api.RunMetrics) []chart {
	var cpu, mem, gpu []series
	memMax := 0.0
	for _, j := range m.Jobs {
		samples := j.History
		if len(samples) == 0 && j.Latest != nil {
			samples = []api.JobSample{*j.Latest}
		}
		name := fmt.Sprintf("job %d", j.JobNum)
		c, me := series{name: name}, series{name: name}
		gpus := map[int]*series{}
		var order []int
		for _, s := range samples {
			if s.CPUPercent != nil {
				c.pts = append(c.pts, point{s.Time, *s.CPUPercent})
			}
			if s.MemoryUsed > 0 {
				me.pts = append(me.pts, point{s.Time, float64(s.MemoryUsed)})
			}
			memMax = max(memMax, float64(s.MemoryLimit), float64(s.MemoryUsed))
			for _, g := range s.GPUs {
				gs, ok := gpus[g.Index]
				if !ok {
					gs = &series{name: fmt.Sprintf("%s GPU %d", name, g.Index)}
					gpus[g.Index] = gs
					order = append(order, g.Index)
				}
				gs.pts = append(gs.pts, point{s.Time, g.Util})
			}
		}
		if memMax == 0 {
			memMax = float64(j.Alloc.Memory)
		}
		cpu, mem = append(cpu, c), append(mem, me)
		for _, i := range order {
			gpu = append(gpu, *gpus[i])
		}
	}
	return []chart{
		{Title: "CPU (% of the allocated CPUs)", SVG: lineChart(cpu, 100, func(v float64) string { return fmt.Sprintf("%.0f%%", v) })},
		{Title: "Memory used", SVG: lineChart(mem, memMax, func(v float64) string { return bytesText(int64(v)) })},
		{Title: "GPU utilisation", SVG: lineChart(gpu, 100, func(v float64) string { return fmt.Sprintf("%.0f%%", v) })},
	}
}

// lineChart draws series over their common time span, 0..at least top on
// the vertical axis; "" when there is nothing to draw.
func lineChart(ss []series, top float64, label func(float64) string) template.HTML {
	const w, h, left, bottom = 600.0, 150.0, 60.0, 20.0
	var t0, t1 time.Time
	n := 0
	for _, s := range ss {
		for _, p := range s.pts {
			if n == 0 || p.t.Before(t0) {
				t0 = p.t
			}
			if n == 0 || p.t.After(t1) {
				t1 = p.t
			}
			top = max(top, p.v)
			n++
		}
	}
	if n == 0 {
		return ""
	}
	if top <= 0 {
		top = 1
	}
	span := t1.Sub(t0).Seconds()
	x := func(t time.Time) float64 {
		if span <= 0 {
			return left
		}
		return left + (w-left-5)*t.Sub(t0).Seconds()/span
	}
	y := func(v float64) float64 { return 5 + (h-bottom-5)*(1-v/top) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" class="chart" role="img" aria-label="%s">`, w, h, html.EscapeString(fmt.Sprintf("%d series from %s to %s", len(ss), clock(t0), clock(t1))))
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/>`, left, y(0), w-5, y(0))
	fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/>`, left, y(top), w-5, y(top))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" class="tick" text-anchor="end">%s</text>`, left-4, y(top)+4, html.EscapeString(label(top)))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" class="tick" text-anchor="end">%s</text>`, left-4, y(0), html.EscapeString(label(0)))
	layout := "15:04:05"
	if span > 20*3600 { // over days: the date too
		layout = "Jan 2 15:04"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="tick">%s</text>`, left, h-4, t0.UTC().Format(layout))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="tick" text-anchor="end">%s</text>`, w-5, h-4, t1.UTC().Format(layout))
	for i, s := range ss {
		if len(s.pts) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline class="s%d" fill="none" points="`, i%6)
		for _, p := range s.pts {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(p.t), y(p.v))
		}
		fmt.Fprintf(&b, `"><title>%s</title></polyline>`, html.EscapeString(s.name))
		if len(s.pts) == 1 {
			fmt.Fprintf(&b, `<circle class="s%d" r="3" cx="%.1f" cy="%.1f"/>`, i%6, x(s.pts[0].t), y(s.pts[0].v))
		}
	}
	b.WriteString(`</svg><p class="legend">`)
	for i, s := range ss {
		if len(s.pts) > 0 {
			fmt.Fprintf(&b, `<span class="key s%d">%s</span> `, i%6, html.EscapeString(s.name))
		}
	}
	b.WriteString(`</p>`)
	return template.HTML(b.String()) // every value above is a number or escaped
}
