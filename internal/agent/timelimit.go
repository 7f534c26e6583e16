package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// A job's time limit may change while it runs (scontrol update
// TimeLimit=). The agent writes the new limit into the job's directory
// (fileLimit) and sends the shim sigForward, as for a forwarded signal; the
// shim reads the file on that signal and at its start (a container job's
// new shim, or a shim that had not started the job yet), and re-times the
// job's deadline and its `signal:` warning from the job's start. The file,
// not job.json, is the limit's truth once it exists: a restarted agent
// reads it too.

// fileLimit holds the job's time limit in seconds ("0": none).
const fileLimit = "time_limit"

// readLimit reads fileLimit; ok is false when there is none.
func readLimit(dir string) (secs int64, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, fileLimit))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// currentLimit is the job's time limit in seconds: fileLimit's, else
// def (job.json's).
func currentLimit(dir string, def int64) int64 {
	if n, ok := readLimit(dir); ok {
		return n
	}
	return def
}

// setLimit gives a job a new time limit (a "limit" message, or a sync whose
// assignment carries another limit than the job's).
func (a *Agent) setLimit(l api.JobLimit) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j, ok := a.jobs[l.JobID]; ok {
		a.limitLocked(j, l.MaxDuration)
	}
}

// limitLocked records the job's new limit and tells its shim. A job not
// started yet takes it from the file when its shim starts.
func (a *Agent) limitLocked(j *localJob, secs int64) {
	if j.asg.MaxDuration == secs {
		return
	}
	j.asg.MaxDuration = secs
	if j.exit != nil || j.dir == "" {
		return
	}
	if err := writeFileAtomic(filepath.Join(j.dir, fileLimit), []byte(strconv.FormatInt(secs, 10))); err != nil {
		a.log.Warn("record a new time limit for the job", "job_id", j.id, "err", err)
		return
	}
	if j.shimPid == 0 {
		return
	}
	a.signalShimLocked(j, sigForward)
}

// jobClock times a job's limit and its `signal:` warning, both counted
// from the job's start. A new limit re-times both: a deadline already
// passed fires at once, and so does a warning whose time has passed; the
// warning is sent once at most, as Slurm sends it (a raised limit does not
// send it again).
type jobClock struct {
	start    time.Time
	asg      api.Assignment // its MaxDuration and Signal
	deadline *time.Timer
	warn     *time.Timer
	warned   bool
}

func newJobClock(start time.Time, asg api.Assignment) *jobClock {
	c := &jobClock{start: start, asg: asg}
	c.arm()
	return c
}

func (c *jobClock) arm() {
	c.stop()
	if c.asg.MaxDuration > 0 {
		c.deadline = time.NewTimer(max(time.Duration(c.asg.MaxDuration)*time.Second-time.Since(c.start), 0))
	}
	if d, ok := signalDue(c.asg); ok && !c.warned {
		c.warn = time.NewTimer(max(d-time.Since(c.start), 0))
	}
}

// setLimit re-times the clock for a limit of secs (0: none).
func (c *jobClock) setLimit(secs int64) {
	if secs != c.asg.MaxDuration {
		c.asg.MaxDuration = secs
		c.arm()
	}
}

func (c *jobClock) stop() {
	if c.deadline != nil {
		c.deadline.Stop()
		c.deadline = nil
	}
	if c.warn != nil {
		c.warn.Stop()
		c.warn = nil
	}
}

// deadlineC and warnC fire when the deadline and the warning are due
// (never, when not set); call deadlinePassed and warnSent once they have.
func (c *jobClock) deadlineC() <-chan time.Time {
	if c.deadline == nil {
		return nil
	}
	return c.deadline.C
}

func (c *jobClock) warnC() <-chan time.Time {
	if c.warn == nil {
		return nil
	}
	return c.warn.C
}

func (c *jobClock) deadlinePassed() { c.deadline = nil }

func (c *jobClock) warnSent() { c.warn, c.warned = nil, true }
