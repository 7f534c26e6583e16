package web

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

func (u *UI) runPage(w http.ResponseWriter, r *http.Request, s *session) {
	data, err := runData(r, s)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	data["Who"], data["Err"] = s.who, r.URL.Query().Get("err")
	u.render(w, r, http.StatusOK, "run", data)
}

// runEvents streams the run page's live parts: its status, facts, jobs,
// charts and events.
func (u *UI) runEvents(w http.ResponseWriter, r *http.Request, s *session) {
	u.stream(w, r, func() ([]sseEvent, error) {
		data, err := runData(r, s)
		if err != nil {
			return nil, err
		}
		return u.fragments("run", data, "status", "facts", "jobs", "charts", "timeline")
	})
}

// runData is what the run page shows of the run its path names.
func runData(r *http.Request, s *session) (map[string]any, error) {
	ref := r.PathValue("ref")
	run, err := s.c.Run(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	m, err := s.c.RunMetrics(r.Context(), ref, client.MetricsOptions{History: -1})
	if err != nil {
		return nil, err
	}
	specJSON := ""
	if run.Spec != nil {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // the template escapes it
		enc.SetIndent("", "  ")
		enc.Encode(run.Spec)
		specJSON = b.String()
	}
	row := rowOf(run)
	return map[string]any{"Run": run, "Row": row, "Spec": specJSON, "Final": isFinal(string(run.Status)),
		"Held": run.Reason == "JobHeldUser" || run.Reason == "JobHeldAdmin", "Pending": row.Pending, "Charts": charts(m),
		"Ref": fmt.Sprint(run.ID)}, nil
}

// logEvents follows a run's output through the API (its own follow, woken
// by each commit) as server-sent events: "log" carries escaped text to
// append, "end" the run's final status.
func (u *UI) logEvents(w http.ResponseWriter, r *http.Request, s *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	var werr error
	end, err := s.c.Logs(r.Context(), r.PathValue("ref"), client.LogOptions{Follow: true, Job: -1}, func(e api.LogEntry) {
		if werr == nil {
			werr = writeEvent(w, "log", html.EscapeString(string(e.Data)))
			fl.Flush()
		}
	})
	switch {
	case err != nil:
		if r.Context().Err() == nil {
			writeEvent(w, "end", "<span class=err>"+html.EscapeString(err.Error())+"</span>")
		}
	case end != nil:
		writeEvent(w, "end", "run ended: "+html.EscapeString(string(end.Status)))
	}
	fl.Flush()
	// The browser reconnects to an ended stream; it is told the run ended
	// and drops the stream (the page's script closes it on "end").
}

// logText is a run's whole output as a text file.
func (u *UI) logText(w http.ResponseWriter, r *http.Request, s *session) {
	ref := r.PathValue("ref")
	var b strings.Builder
	if _, err := s.c.Logs(r.Context(), ref, client.LogOptions{Job: -1}, func(e api.LogEntry) { b.Write(e.Data) }); err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", "run-"+safeName(ref)+".log"))
	w.Write([]byte(b.String()))
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// stop stops or (abort=1) aborts a run through the API.
func (u *UI) stop(w http.ResponseWriter, r *http.Request, s *session) {
	ref := r.PathValue("ref")
	_, err := s.c.Stop(r.Context(), ref, r.PostFormValue("abort") == "1")
	u.back(w, r, Prefix+"runs/"+url.PathEscape(ref), err)
}

// control holds or releases a run through the API.
func (u *UI) control(w http.ResponseWriter, r *http.Request, s *session) {
	ref := r.PathValue("ref")
	var err error
	switch a := r.PostFormValue("action"); a {
	case "hold", "release":
		_, err = s.c.Control(r.Context(), ref, api.ControlRequest{Action: a})
	default:
		err = fmt.Errorf("unknown action %q (hold or release)", a)
	}
	u.back(w, r, Prefix+"runs/"+url.PathEscape(ref), err)
}

// back returns to the page an action was taken on, with the API's
// refusal, if any, shown there.
func (u *UI) back(w http.ResponseWriter, r *http.Request, to string, err error) {
	if err != nil {
		to += "?err=" + url.QueryEscape(err.Error())
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
