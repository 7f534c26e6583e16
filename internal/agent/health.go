package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// Health: every Monitoring.HealthEvery the agent checks its node, as slurmd
// runs HealthCheckProgram, and reports the outcome to the server (POST
// /agent/health), which drains a failed node and lifts that drain once a
// check passes. Three checks, the worst outcome wins:
//
//   - the administrator's program (--health-check), run with /bin/sh -c in
//     a process group of its own: exit 0 passes; another status, or no exit
//     within the timeout (the group is killed), is a failure whose reason is
//     the last line of its output;
//   - where nvidia-smi runs and the node has GPUs, their state (see
//     gpuFindings): uncorrectable ECC errors, a GPU that needs a reset or is
//     missing, or nvidia-smi failing are failures; correctable ECC errors
//     and a hot GPU are warnings (the node stays in service).
//
//   - the disk of its data directory (see diskFindings): less free room
//     (or fewer free inodes) than a job needs to start and to write its
//     output is a failure, so that the node is drained instead of failing
//     every job sent to it. Besides the schedule, this check runs as soon
//     as the agent meets a full disk (a job that cannot start, output
//     lost, a frame cut short), and a change of its outcome is reported
//     at once.
//
// A node with no failing check reports ok, which also lifts a failure an
// earlier configuration left. Every outcome is reported, the first at once;
// one the server did not take is sent again until it does or the next
// check supersedes it.

const (
	defaultHealthEvery = time.Minute
	maxHealthTimeout   = time.Minute
	// gpuHotC is the temperature (°C) from which a GPU is reported as a
	// warning.
	gpuHotC = 85
)

func (a *Agent) healthLoop(ctx context.Context) {
	m := a.cfg.Monitor
	every := m.HealthEvery
	if every <= 0 {
		every = defaultHealthEvery
	}
	timeout := m.HealthTimeout
	if timeout <= 0 {
		timeout = min(every, maxHealthTimeout)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var report api.AgentHealth
	var others []finding // of the last scheduled check, but the disk's
	delivered := true
	var next time.Time
	backoff := 50 * time.Millisecond
	for {
		scheduled := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.diskKick:
		}
		if now := a.cfg.Clock.Now(); !now.Before(next) {
			next = now.Add(every)
			others = a.otherFindings(ctx, timeout)
			if ctx.Err() != nil {
				return
			}
			scheduled = true
		}
		// The disk is looked at on every wake-up; between scheduled
		// checks only a change of status is news.
		h := combine(append(slices.Clone(others), a.diskFindings()...), a.now())
		if scheduled || h.Status != report.Health.Status {
			report = api.AgentHealth{Node: a.cfg.Name, Health: h}
			if h.Status != api.HealthOK {
				a.log.Warn("health check", "status", h.Status, "reason", h.Reason)
			}
			delivered, backoff = false, 50*time.Millisecond
		}
		if !delivered {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := a.c.AgentHealth(pctx, report)
			cancel()
			if err == nil {
				delivered = true
			} else if ctx.Err() == nil {
				a.log.Debug("health report not delivered; retrying", "err", err, "in", backoff)
			}
		}
		wait := next.Sub(a.cfg.Clock.Now())
		if !delivered {
			wait = min(wait, backoff)
			backoff = min(backoff*2, 5*time.Second)
		}
		t.Reset(max(wait, 0))
	}
}

// finding is one thing a check found wrong.
type finding struct {
	level string // api.HealthWarning or api.HealthFailure
	text  string
}

// checkHealth runs the checks and combines what they found.
func (a *Agent) checkHealth(ctx context.Context, timeout time.Duration) api.NodeHealth {
	return combine(append(a.otherFindings(ctx, timeout), a.diskFindings()...), a.now())
}

// otherFindings runs the checks but the disk's: the administrator's
// program and the GPUs'.
func (a *Agent) otherFindings(ctx context.Context, timeout time.Duration) []finding {
	var found []finding
	if prog := a.cfg.Monitor.HealthCheck; prog != "" {
		if why, ok := runHealthCheck(ctx, prog, timeout, a.healthEnv()); !ok {
			found = append(found, finding{api.HealthFailure, why})
		}
	}
	if m := a.cfg.Monitor; !m.NoGPUHealth && m.NvidiaSMI != "" && len(a.info.GPUs) > 0 {
		found = append(found, a.gpuHealth(ctx)...)
	}
	return found
}

// checkDiskSoon has the disk checked now: the agent met a full disk.
func (a *Agent) checkDiskSoon() {
	select {
	case a.diskKick <- struct{}{}:
	default:
	}
}

// Disk room the data directory must have, unless Monitoring.MinFreeDisk
// says otherwise: 64 MB, or 5% of a smaller filesystem; and inodes.
const (
	defaultMinFreeDisk = 64 << 20
	minFreeInodes      = 64
)

// diskFindings checks the filesystem of the data directory, where every
// job keeps its script, its output and its status.
func (a *Agent) diskFindings() []finding {
	dir := a.cfg.DataDir
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return []finding{{api.HealthFailure, fmt.Sprintf("data directory %s: %v", dir, err)}}
	}
	return diskVerdict(dir, int64(st.Bavail)*st.Bsize, int64(st.Blocks)*st.Bsize, st.Ffree, st.Files, a.cfg.Monitor.MinFreeDisk)
}

// diskVerdict judges free of total bytes, and the free inodes, of the
// filesystem of dir against least (0: the default).
func diskVerdict(dir string, free, total int64, freeInodes, inodes uint64, least int64) []finding {
	if least <= 0 {
		least = min(defaultMinFreeDisk, total/20)
	}
	var found []finding
	if free < least {
		found = append(found, finding{api.HealthFailure, fmt.Sprintf("disk full: data directory %s has %s free of %s (under %s)",
			dir, sizeText(free), sizeText(total), sizeText(least))})
	}
	if inodes > 0 && freeInodes < minFreeInodes {
		found = append(found, finding{api.HealthFailure, fmt.Sprintf("disk full: data directory %s has %d inodes free of %d", dir, freeInodes, inodes)})
	}
	return found
}

// sizeText is a size for people: "1.5GB", "300KB", "12 bytes".
func sizeText(b int64) string {
	switch {
	case b >= 1<<30:
		return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + "GB"
	case b >= 1<<20:
		return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + "MB"
	case b >= 1<<10:
		return strconv.FormatFloat(float64(b)/(1<<10), 'f', 1, 64) + "KB"
	}
	return strconv.FormatInt(b, 10) + " bytes"
}

// combine makes one outcome of the findings: the worst level, and the
// findings of that level as the reason (bounded).
func combine(found []finding, now time.Time) api.NodeHealth {
	h := api.NodeHealth{Status: api.HealthOK, CheckedAt: now}
	for _, level := range []string{api.HealthFailure, api.HealthWarning} {
		var texts []string
		for _, f := range found {
			if f.level == level {
				texts = append(texts, f.text)
			}
		}
		if len(texts) > 0 {
			h.Status, h.Reason = level, strings.Join(texts, "; ")
			if len(h.Reason) > 512 {
				h.Reason = h.Reason[:512] + "…"
			}
			break
		}
	}
	return h
}

// healthEnv is the health program's environment: the agent's, less the
// server's credentials, with the node's name and fleet.
func (a *Agent) healthEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return hiddenEnv[name]
	})
	return append(env, "BERTH_NODE_NAME="+a.cfg.Name, "BERTH_NODE_FLEET="+a.cfg.Fleet)
}

// runHealthCheck runs prog and tells whether it passed; why says what
// failed: the last line of its output, else its status.
func runHealthCheck(ctx context.Context, prog string, timeout time.Duration, env []string) (why string, ok bool) {
	out := &tailBuffer{max: 64 << 10}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Sprintf("health check %q cannot run: %v", prog, err), false
	}
	cmd := exec.Command("/bin/sh", "-c", prog)
	cmd.Env = env
	// A file, not a writer: Wait returns when the program exits, even if
	// something it left behind still holds its output.
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return fmt.Sprintf("health check %q cannot run: %v", prog, err), false
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	timedOut := false
	select {
	case err = <-done:
	case <-t.C:
		timedOut = true
	case <-ctx.Done():
		timedOut = true
	}
	// Whatever it started goes with it (what left its process group does
	// not: a daemon of its own is its own business).
	_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	if timedOut {
		err = <-done
	}
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	r.Close()
	<-copied
	last := lastLine(out.bytes())
	switch {
	case timedOut:
		why = fmt.Sprintf("health check timed out after %s", timeout)
		if last != "" {
			why += ": " + last
		}
		return why, false
	case err == nil:
		return "", true
	case last != "":
		return last, false
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("health check %q failed: %s", prog, ee.ProcessState), false
	}
	return fmt.Sprintf("health check %q failed: %v", prog, err), false
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.b)
}

// gpuHealthQuery is what the GPU check asks nvidia-smi.
const gpuHealthQuery = "--query-gpu=index,uuid,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,temperature.gpu"

// gpuHealth asks nvidia-smi about the node's GPUs.
func (a *Agent) gpuHealth(ctx context.Context) []finding {
	out, err := a.nvidiaSMI(ctx, gpuHealthQuery)
	if err != nil {
		return []finding{{api.HealthFailure, err.Error()}}
	}
	var expect []int
	if !a.cfg.DeclaredGPUs {
		for _, g := range a.info.GPUs {
			expect = append(expect, g.Index)
		}
	}
	found, err := gpuFindings(out, expect)
	if err != nil {
		found = append(found, finding{api.HealthWarning, err.Error()})
	}
	return found
}

// gpuFindings reads `index, uuid, ecc.errors.uncorrected.volatile.total,
// ecc.errors.corrected.volatile.total, temperature.gpu` lines. Failures:
// uncorrectable ECC errors since the driver loaded, a field that says the
// GPU needs a reset or had an unknown error, a GPU of expect (the indices
// detected at start) that nvidia-smi no longer lists. Warnings: correctable
// ECC errors, a temperature of gpuHotC or more. A field nvidia-smi cannot
// tell ("[N/A]": ECC off, or not supported) counts as nothing found.
func gpuFindings(out []byte, expect []int) ([]finding, error) {
	var found []finding
	seen := map[int]bool{}
	var bad error
	for i, f := range csvLines(out) {
		if len(f) != 5 {
			bad = fmt.Errorf("agent: nvidia-smi health line %d: want 5 fields, got %d", i+1, len(f))
			continue
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			bad = fmt.Errorf("agent: nvidia-smi health line %d: index %q", i+1, f[0])
			continue
		}
		seen[idx] = true
		gpu := "GPU " + f[0]
		if broken := brokenField(f[1:]); broken != "" {
			found = append(found, finding{api.HealthFailure, gpu + ": " + broken})
			continue
		}
		if n, ok := smiFloat(f[2]); ok && n > 0 {
			found = append(found, finding{api.HealthFailure, fmt.Sprintf("%s: %d uncorrectable ECC errors", gpu, int64(n))})
		}
		if n, ok := smiFloat(f[3]); ok && n > 0 {
			found = append(found, finding{api.HealthWarning, fmt.Sprintf("%s: %d correctable ECC errors", gpu, int64(n))})
		}
		if c, ok := smiFloat(f[4]); ok && c >= gpuHotC {
			found = append(found, finding{api.HealthWarning, fmt.Sprintf("%s: temperature %d°C", gpu, int64(c))})
		}
	}
	for _, idx := range expect {
		if !seen[idx] {
			found = append(found, finding{api.HealthFailure, fmt.Sprintf("GPU %d: missing (nvidia-smi lists %d of %d)", idx, len(seen), len(expect))})
		}
	}
	return found, bad
}

// brokenField finds a field in which nvidia-smi says the GPU is unusable.
func brokenField(fields []string) string {
	for _, v := range fields {
		l := strings.ToLower(v)
		if strings.Contains(l, "requires reset") || strings.Contains(l, "unknown error") || strings.Contains(l, "gpu is lost") {
			return strings.Trim(v, "[]")
		}
	}
	return ""
}
