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
// check passes. Two checks, the worse outcome wins:
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
// A node with neither check reports ok, which also lifts a failure an
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
	delivered := true
	var next time.Time
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := a.cfg.Clock.Now(); !now.Before(next) {
			next = now.Add(every)
			report = api.AgentHealth{Node: a.cfg.Name, Health: a.checkHealth(ctx, timeout)}
			if ctx.Err() != nil {
				return
			}
			if report.Health.Status != api.HealthOK {
				a.log.Warn("health check", "status", report.Health.Status, "reason", report.Health.Reason)
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
	var found []finding
	if prog := a.cfg.Monitor.HealthCheck; prog != "" {
		if why, ok := runHealthCheck(ctx, prog, timeout, a.healthEnv()); !ok {
			found = append(found, finding{api.HealthFailure, why})
		}
	}
	if m := a.cfg.Monitor; !m.NoGPUHealth && m.NvidiaSMI != "" && len(a.info.GPUs) > 0 {
		found = append(found, a.gpuHealth(ctx)...)
	}
	return combine(found, a.now())
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
		return strings.HasPrefix(kv, "BERTH_TOKEN=") || strings.HasPrefix(kv, "BERTH_URL=")
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
