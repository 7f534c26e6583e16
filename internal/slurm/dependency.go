package slurm

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrDependency is returned for a --dependency value slurmctld refuses
// ("Job dependency problem").
var ErrDependency = errors.New("slurm: job dependency problem")

// DepType is the condition of one dependency.
type DepType string

// The dependency types, spelt as Slurm spells them.
const (
	DepAfter      DepType = "after"      // the other job started (or was cancelled)
	DepAfterAny   DepType = "afterany"   // the other job ended, any state
	DepAfterOK    DepType = "afterok"    // the other job completed with exit code 0
	DepAfterNotOK DepType = "afternotok" // the other job failed, timed out, ...
	DepAfterCorr  DepType = "aftercorr"  // the same task id of the other array completed
	DepAfterBB    DepType = "afterburstbuffer"
	DepExpand     DepType = "expand"
	DepSingleton  DepType = "singleton" // no other job of this user and name runs
)

// DepState is how far a dependency is: Slurm shows it in parentheses.
type DepState string

// Dependency states.
const (
	DepUnfulfilled DepState = "unfulfilled"
	DepFulfilled   DepState = "fulfilled"
	DepFailed      DepState = "failed" // can never be satisfied
)

// Array task selectors of a dependency on an array job.
const (
	DepWholeJob = -1 // "123": the whole job (or array)
	DepAllTasks = -2 // "123_*": every task, one by one (aftercorr style)
)

// Dep is one "type:job" condition.
type Dep struct {
	Type   DepType
	JobID  uint32        // 0 for singleton
	TaskID int           // an array task id, DepWholeJob or DepAllTasks
	Delay  time.Duration // "+minutes" for after: start this long after
	State  DepState      // unfulfilled unless the caller knows better
}

// Dependency is a parsed --dependency: all conditions must hold, or with
// Any (a "?" anywhere) one is enough, as in Slurm.
type Dependency struct {
	Any  bool
	Deps []Dep
}

// ParseDependency parses --dependency as slurmctld does
// (update_job_dependency): "afterok:1:2,afterany:3" (all), "afterok:1?afterany:2"
// (any), "after:5+10" (10 minutes after job 5 started), "singleton",
// "afterok:7_3" (task 3 of array 7), "afterok:7_*", and the old form, a
// plain list of job ids meaning afterany. A "(state)" suffix as Slurm prints
// it is accepted. "" and "0" mean no dependency (a nil result).
func ParseDependency(s string) (*Dependency, error) {
	if s == "" || s == "0" {
		return nil, nil
	}
	d := &Dependency{}
	tok := s
	for {
		if hasPrefixFold(tok, "singleton") {
			tok = tok[len("singleton"):]
			state, rest, ok := parseDepState(tok)
			if !ok {
				return nil, ErrDependency
			}
			tok = rest
			d.Deps = append(d.Deps, Dep{Type: DepSingleton, TaskID: DepWholeJob, State: state})
			switch {
			case strings.HasPrefix(tok, ","):
				tok = tok[1:]
				continue
			case strings.HasPrefix(tok, "?"):
				tok = tok[1:]
				d.Any = true
				continue
			case tok != "":
				return nil, ErrDependency
			}
			return d, nil
		}
		colon := strings.IndexByte(tok, ':')
		if colon < 0 && tok != "" && tok[0] >= '0' && tok[0] <= '9' {
			// Old format: job ids separated by commas, each afterany.
			id, task, rest, ok := parseDepJobID(tok)
			if !ok || (rest != "" && rest[0] != ',') {
				return nil, ErrDependency
			}
			d.Deps = append(d.Deps, Dep{Type: DepAfterAny, JobID: id, TaskID: task, State: DepUnfulfilled})
			if rest == "" {
				return d, nil
			}
			tok = rest[1:]
			continue
		}
		if colon < 0 {
			return nil, ErrDependency
		}
		var typ DepType
		for _, t := range []DepType{DepAfterNotOK, DepAfterCorr, DepAfterAny, DepAfterOK, DepAfterBB, DepAfter, DepExpand} {
			if strings.EqualFold(tok[:colon], string(t)) {
				typ = t
				break
			}
		}
		if typ == "" {
			return nil, ErrDependency
		}
		tok = tok[colon+1:]
		for {
			id, task, rest, ok := parseDepJobID(tok)
			if !ok || (rest != "" && !strings.ContainsRune(",?:+(", rune(rest[0]))) {
				return nil, ErrDependency
			}
			dep := Dep{Type: typ, JobID: id, TaskID: task}
			if strings.HasPrefix(rest, "+") {
				mins, r := strtol(rest[1:])
				if mins <= 0 || mins > 1<<31/60 {
					return nil, ErrDependency
				}
				dep.Delay = time.Duration(mins) * time.Minute
				rest = r
			}
			state, r, ok := parseDepState(rest)
			if !ok {
				return nil, ErrDependency
			}
			dep.State, rest = state, r
			d.Deps = append(d.Deps, dep)
			tok = rest
			if !strings.HasPrefix(tok, ":") {
				break
			}
			tok = tok[1:]
		}
		switch {
		case strings.HasPrefix(tok, ","):
			tok = tok[1:]
		case strings.HasPrefix(tok, "?"):
			tok = tok[1:]
			d.Any = true
		case tok == "":
			return d, nil
		default:
			return nil, ErrDependency
		}
	}
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// parseDepJobID reads "123", "123_4" or "123_*".
func parseDepJobID(s string) (id uint32, task int, rest string, ok bool) {
	n, rest := strtol(s)
	if n <= 0 || n > 1<<32-1 || rest == s || s[0] < '0' || s[0] > '9' {
		return 0, 0, s, false
	}
	task = DepWholeJob
	if strings.HasPrefix(rest, "_") {
		if strings.HasPrefix(rest, "_*") {
			task, rest = DepAllTasks, rest[2:]
		} else {
			t, r := strtol(rest[1:])
			if t < 0 || t > 1<<31-1 || r == rest[1:] {
				return 0, 0, s, false
			}
			task, rest = int(t), r
		}
	}
	return uint32(n), task, rest, true
}

// parseDepState reads an optional "(fulfilled)", "(failed)" or any other
// "(...)" (unfulfilled), as _parse_depend_state does.
func parseDepState(s string) (DepState, string, bool) {
	if !strings.HasPrefix(s, "(") {
		return DepUnfulfilled, s, true
	}
	end := strings.IndexByte(s, ')')
	if end < 0 {
		return "", s, false
	}
	state := DepUnfulfilled
	switch strings.ToLower(s[1:end]) {
	case "fulfilled":
		state = DepFulfilled
	case "failed":
		state = DepFailed
	}
	return state, s[end+1:], true
}

// String prints the dependency as squeue's %E and scontrol's Dependency=
// show it: one "type:job(state)" per job, fulfilled ones left out, joined
// by "," or "?"; "(null)" when nothing is left.
func (d *Dependency) String() string {
	if d == nil {
		return "(null)"
	}
	var b strings.Builder
	for _, dep := range d.Deps {
		if dep.State == DepFulfilled {
			continue
		}
		if b.Len() > 0 {
			if d.Any {
				b.WriteByte('?')
			} else {
				b.WriteByte(',')
			}
		}
		b.WriteString(dep.format(true))
	}
	if b.Len() == 0 {
		return "(null)"
	}
	return b.String()
}

// Spec prints the dependency back in the form sbatch accepts, states left
// out: "afterok:1,afterok:2".
func (d *Dependency) Spec() string {
	if d == nil {
		return ""
	}
	parts := make([]string, len(d.Deps))
	for i, dep := range d.Deps {
		parts[i] = dep.format(false)
	}
	sep := ","
	if d.Any {
		sep = "?"
	}
	return strings.Join(parts, sep)
}

func (dep Dep) format(withState bool) string {
	state := dep.State
	if state == "" {
		state = DepUnfulfilled
	}
	if dep.Type == DepSingleton {
		if withState {
			return "singleton(" + string(state) + ")"
		}
		return "singleton"
	}
	s := string(dep.Type) + ":" + strconv.FormatUint(uint64(dep.JobID), 10)
	switch {
	case dep.TaskID == DepAllTasks:
		s += "_*"
	case dep.TaskID >= 0:
		s += "_" + strconv.Itoa(dep.TaskID)
	}
	if dep.Delay > 0 {
		s += "+" + strconv.FormatInt(int64(dep.Delay/time.Minute), 10)
	}
	if withState {
		s += "(" + string(state) + ")"
	}
	return s
}
