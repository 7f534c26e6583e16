package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// runFilter is the runs page's filter, from its query string.
type runFilter struct {
	Status, User, Fleet string
	All                 bool
}

func filterOf(q url.Values) runFilter {
	return runFilter{Status: q.Get("status"), User: q.Get("user"), Fleet: q.Get("fleet"), All: q.Get("all") == "1"}
}

// query is f as a query string (for the live stream's URL).
func (f runFilter) query() string {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "user": f.User, "fleet": f.Fleet} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.All {
		q.Set("all", "1")
	}
	return q.Encode()
}

// runRow is one line of the runs table, folded as berth ps folds it.
type runRow struct {
	ID                        int64
	Name, Resources, User     string
	Status, Reason, Est, Exit string
	Fleets, Nodes, Submitted  string
	BlockedBy                 []int64
	Pending                   bool
}

// listRuns reads the runs f selects through the API (the fleet filter
// applies to the runs' configurations, which name their fleets).
func listRuns(r *http.Request, s *session, f runFilter) ([]runRow, error) {
	o := client.ListOptions{All: f.All || isFinal(f.Status), Spec: f.Fleet != "", Limit: 500}
	if f.User != "" {
		o.Users = []string{f.User}
	}
	if f.Status != "" {
		o.Statuses = []api.Status{api.Status(f.Status)}
	}
	var rows []runRow
	err := s.c.EachRun(r.Context(), o, func(run *api.Run) error {
		if f.Fleet != "" && (run.Spec == nil || !slices.Contains(run.Spec.Fleets, f.Fleet)) {
			return nil
		}
		rows = append(rows, rowOf(run))
		return nil
	})
	return rows, err
}

func isFinal(status string) bool {
	switch api.Status(status) {
	case api.StatusDone, api.StatusFailed, api.StatusTerminated, api.StatusAborted:
		return true
	}
	return false
}

func rowOf(run *api.Run) runRow {
	row := runRow{ID: run.ID, Name: run.Name, Resources: run.Resources, User: run.User, Status: string(run.Status),
		Reason: run.Reason, Exit: exitText(run.ExitCode), Submitted: clock(run.SubmittedAt), BlockedBy: run.BlockedBy,
		Nodes: strings.Join(run.Nodes, ",")}
	if run.Spec != nil {
		row.Fleets = strings.Join(run.Spec.Fleets, ",")
	}
	if run.EstimatedStart != nil {
		row.Est = clock(*run.EstimatedStart)
	}
	if a := run.Array; a != nil {
		// The tasks not created yet fold into one line, NAME_[7-100%10],
		// as berth ps and squeue show them; created tasks are runs.
		if a.NWaiting == 0 {
			row.Name += "_[]"
		} else {
			row.Name += "_[" + a.Waiting
			if a.Throttle > 0 {
				row.Name += fmt.Sprintf("%%%d", a.Throttle)
			}
			row.Name += "]"
			row.Status = string(api.StatusSubmitted)
			if a.Throttle > 0 && row.Reason == "" {
				row.Reason = "JobArrayTaskLimit"
			}
		}
	}
	row.Pending = row.Status == string(api.StatusSubmitted) || row.Status == string(api.StatusScheduled)
	return row
}

func exitText(c *int) string {
	if c == nil {
		return ""
	}
	return strconv.Itoa(*c)
}

// clock is a time as the pages print it: UTC, to the second.
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

var statuses = []api.Status{api.StatusSubmitted, api.StatusScheduled, api.StatusProvisioning, api.StatusPulling, api.StatusRunning,
	api.StatusTerminating, api.StatusDone, api.StatusFailed, api.StatusTerminated, api.StatusAborted}

func (u *UI) runsPage(w http.ResponseWriter, r *http.Request, s *session) {
	f := filterOf(r.URL.Query())
	rows, err := listRuns(r, s, f)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "runs", map[string]any{"Who": s.who, "Filter": f, "Rows": rows,
		"Statuses": statuses, "Live": Prefix + "runs/events?" + f.query()})
}

// runsEvents streams the runs table's rows (event "runs") whenever they
// change, read again every Options.Poll.
func (u *UI) runsEvents(w http.ResponseWriter, r *http.Request, s *session) {
	f := filterOf(r.URL.Query())
	u.stream(w, r, func() ([]sseEvent, error) {
		rows, err := listRuns(r, s, f)
		if err != nil {
			return nil, err
		}
		evs, err := u.fragments("runs", map[string]any{"Rows": rows}, "rows")
		if err == nil {
			evs[0].name = "runs"
		}
		return evs, err
	})
}

// sseEvent is a live fragment: the event's name and its HTML.
type sseEvent struct{ name, html string }

// fragments draws blocks of page name with data, each as the event of its
// name.
func (u *UI) fragments(page string, data map[string]any, blocks ...string) ([]sseEvent, error) {
	var out []sseEvent
	for _, name := range blocks {
		var b bytes.Buffer
		if err := u.pages[page].ExecuteTemplate(&b, name, data); err != nil {
			return nil, err
		}
		out = append(out, sseEvent{name, b.String()})
	}
	return out, nil
}

// stream serves live fragments as server-sent events: read gives them; each
// is sent when it differs from the last one of its name sent. They are read
// again at the cluster's changes (Options.Changed), else polled.
func (u *UI) stream(w http.ResponseWriter, r *http.Request, read func() ([]sseEvent, error)) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	last := map[string]string{}
	every := u.opt.Poll
	if u.opt.Changed != nil {
		every = u.opt.Refresh
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		// The change to wait for is taken before reading: one made during
		// the read is not missed.
		var changed <-chan struct{}
		if u.opt.Changed != nil {
			changed = u.opt.Changed()
		}
		evs, err := read()
		if err != nil {
			if r.Context().Err() == nil {
				u.log.Warn("dashboard stream", "path", r.URL.Path, "err", err)
			}
			return
		}
		sent := false
		for _, e := range evs {
			if was, ok := last[e.name]; ok && was == e.html {
				continue
			}
			last[e.name] = e.html
			if writeEvent(w, e.name, e.html) != nil {
				return
			}
			sent = true
		}
		if sent {
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-changed:
			// A burst of changes is read once: after the first, wait.
			select {
			case <-r.Context().Done():
				return
			case <-time.After(u.opt.Spacing):
			}
		case <-tick.C:
			if changed != nil {
				// Unchanged for a while: a comment keeps proxies from
				// closing the stream.
				if _, err := w.Write([]byte(": alive\n\n")); err != nil {
					return
				}
				fl.Flush()
			}
		}
	}
}

// writeEvent writes one server-sent event; each line of data is a data:
// field (the browser joins them with newlines).
func writeEvent(w http.ResponseWriter, event, data string) error {
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: " + strings.TrimRight(line, "\r") + "\n")
	}
	b.WriteString("\n")
	_, err := w.Write([]byte(b.String()))
	return err
}

// bytesText is a size as berth prints it (1.5GB).
func bytesText(b int64) string { return spec.Bytes(b).Approx() }

// pct is part of total as a percentage for a bar's width, 0..100.
func pct(part, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return min(100, max(0, 100*part/total))
}

var funcs = template.FuncMap{"bytes": bytesText, "pct": pct, "clock": clock, "join": strings.Join,
	"inc": func(i int) int { return i + 1 }, "sharef": shareFmt,
	"ids": func(ids []int64) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.FormatInt(id, 10)
		}
		return strings.Join(s, ", ")
	}}
