package web

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// maxMatches caps a log search's answer; maxQuery a search's length.
const (
	maxMatches = 1000
	maxQuery   = 1000
)

// logMatch is one line of a run's output that matched a search.
type logMatch struct {
	Job  int
	Line int // 1-based, within its job's output
	HTML template.HTML
}

// searchResult is a log search's answer.
type searchResult struct {
	Query   string
	Regexp  bool
	Error   string
	Matches []logMatch
	Capped  bool // more lines matched than are shown
	Jobs    int  // jobs with output
}

// searchLog finds the lines of a run's output (read through the API)
// that contain a plain string, or match a regular expression (RE2: linear
// time in the output), with their line numbers and the matches marked.
// An htmx request gets the results alone; a plain one the run's page
// with them.
func (u *UI) searchLog(w http.ResponseWriter, r *http.Request, s *session) {
	ref := r.PathValue("ref")
	q := r.URL.Query()
	res := searchResult{Query: q.Get("q"), Regexp: q.Get("re") == "1"}
	match, err := matcher(res.Query, res.Regexp)
	if err != nil {
		res.Error = err.Error()
	} else if match != nil {
		out := map[int]*bytes.Buffer{}
		if _, err := s.c.Logs(r.Context(), ref, client.LogOptions{Job: -1}, func(e api.LogEntry) {
			b := out[e.JobNum]
			if b == nil {
				b = &bytes.Buffer{}
				out[e.JobNum] = b
			}
			b.Write(e.Data)
		}); err != nil {
			if r.Header.Get("HX-Request") == "" {
				u.apiFailure(w, r, s, err)
				return
			}
			res.Error = err.Error()
		}
		res.Matches, res.Capped = searchLines(out, match)
		res.Jobs = len(out)
	}
	if r.Header.Get("HX-Request") != "" {
		u.renderFragment(w, "run", "search", res)
		return
	}
	data, err := runData(r, s)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	data["Who"], data["Search"] = s.who, res
	u.render(w, r, http.StatusOK, "run", data)
}

// matcher returns the spans of each match in a line; nil for an empty
// query.
func matcher(q string, re bool) (func(string) [][]int, error) {
	switch {
	case q == "":
		return nil, nil
	case len(q) > maxQuery:
		return nil, fmt.Errorf("the search is longer than %d characters", maxQuery)
	case re:
		x, err := regexp.Compile(q)
		if err != nil {
			return nil, fmt.Errorf("not a regular expression: %v", err)
		}
		return func(line string) [][]int {
			var out [][]int
			for _, m := range x.FindAllStringIndex(line, -1) {
				if m[1] > m[0] { // an empty match marks nothing, but the line matched
					out = append(out, m)
				}
			}
			if out == nil && x.MatchString(line) {
				out = [][]int{}
			}
			return out
		}, nil
	default:
		return func(line string) [][]int {
			var out [][]int
			for off := 0; ; {
				i := strings.Index(line[off:], q)
				if i < 0 {
					return out
				}
				out = append(out, []int{off + i, off + i + len(q)})
				off += i + len(q)
			}
		}, nil
	}
}

// searchLines matches each job's output line by line, jobs in order, up
// to maxMatches lines.
func searchLines(out map[int]*bytes.Buffer, match func(string) [][]int) ([]logMatch, bool) {
	jobs := make([]int, 0, len(out))
	for j := range out {
		jobs = append(jobs, j)
	}
	sort.Ints(jobs)
	var res []logMatch
	for _, j := range jobs {
		text := strings.TrimSuffix(out[j].String(), "\n")
		for n, line := range strings.Split(text, "\n") {
			spans := match(line)
			if spans == nil {
				continue
			}
			if len(res) == maxMatches {
				return res, true
			}
			res = append(res, logMatch{Job: j, Line: n + 1, HTML: marked(line, spans)})
		}
	}
	return res, false
}

// marked is line, escaped, with each span in <mark>.
func marked(line string, spans [][]int) template.HTML {
	var b strings.Builder
	at := 0
	for _, m := range spans {
		b.WriteString(html.EscapeString(line[at:m[0]]))
		b.WriteString("<mark>")
		b.WriteString(html.EscapeString(line[m[0]:m[1]]))
		b.WriteString("</mark>")
		at = m[1]
	}
	b.WriteString(html.EscapeString(line[at:]))
	return template.HTML(b.String()) // escaped above
}

// renderFragment writes one template of a page alone (an htmx answer).
func (u *UI) renderFragment(w http.ResponseWriter, page, name string, data any) {
	var sb strings.Builder
	if err := u.pages[page].ExecuteTemplate(&sb, name, data); err != nil {
		u.log.Error("dashboard fragment", "page", page, "fragment", name, "err", err)
		http.Error(w, "the fragment could not be drawn: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(sb.String()))
}
