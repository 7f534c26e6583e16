package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
)

// Metrics: every Monitoring.MetricsEvery the agent reads each running job's
// use from its cgroup (CPU time, working set, peak, limit) and, where
// nvidia-smi runs, the figures of its GPUs, and posts them to the server
// (POST /agent/metrics), which keeps a bounded history per job. Samples are
// best effort: one that cannot be delivered is dropped, not retried.

// Monitoring configures what an agent measures and checks on its node.
type Monitoring struct {
	// MetricsEvery is how often running jobs are sampled (0: 5 s;
	// negative: never).
	MetricsEvery time.Duration
	// NvidiaSMI is the nvidia-smi to ask about GPUs ("": the one on PATH,
	// if any; tests give a script).
	NvidiaSMI string
	// HealthCheck is a program run every HealthEvery (0: 60 s), like
	// Slurm's HealthCheckProgram: a non-zero exit, or no exit within
	// HealthTimeout (0: the smaller of 60 s and HealthEvery), reports the
	// node failed, with the last line of its output as the reason; the
	// server drains it until a check passes. "": no program (the GPU check
	// still runs where nvidia-smi does).
	HealthCheck   string
	HealthEvery   time.Duration
	HealthTimeout time.Duration
	// NoGPUHealth turns the nvidia-smi health check off.
	NoGPUHealth bool
	// MinFreeDisk is the room the data directory's filesystem must have
	// free (bytes; 0: 64 MB, or 5% of a smaller filesystem): under it,
	// the node reports a failure (disk full) and is drained.
	MinFreeDisk int64
}

const defaultMetricsEvery = 5 * time.Second

// startMonitoring starts the sampler and the health checks.
func (a *Agent) startMonitoring(ctx context.Context) {
	m := &a.cfg.Monitor
	if m.MetricsEvery == 0 {
		m.MetricsEvery = defaultMetricsEvery
	}
	if m.NvidiaSMI == "" {
		if p, err := exec.LookPath("nvidia-smi"); err == nil {
			m.NvidiaSMI = p
		}
	}
	if m.MetricsEvery > 0 {
		go a.sampler(ctx)
	}
	go a.healthLoop(ctx)
}

// cpuMark is a job's CPU time at its previous sample.
type cpuMark struct {
	at   time.Time
	cpu  time.Duration
	peak int64
}

// sampled is what the sampler needs of a running job, copied under a.mu.
type sampled struct {
	id    int64
	cg    *cgroup.Spec
	alloc api.Alloc
}

func (a *Agent) sampler(ctx context.Context) {
	t := time.NewTicker(a.cfg.Monitor.MetricsEvery)
	defer t.Stop()
	marks := map[int64]cpuMark{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		samples := a.sample(ctx, marks, a.cfg.Clock.Now())
		if len(samples) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, a.cfg.Monitor.MetricsEvery+5*time.Second)
		err := a.c.AgentMetrics(pctx, api.AgentMetrics{Node: a.cfg.Name, Samples: samples})
		cancel()
		if err != nil && ctx.Err() == nil {
			a.log.Debug("metrics not delivered", "err", err)
		}
	}
}

// sample measures every running job; marks carry each job's previous CPU
// time from one call to the next.
func (a *Agent) sample(ctx context.Context, marks map[int64]cpuMark, now time.Time) []api.JobSample {
	a.mu.Lock()
	var jobs []sampled
	for id, j := range a.jobs {
		if j.exit == nil && j.shimPid != 0 && !j.orphan && !j.rerun {
			jobs = append(jobs, sampled{id: id, cg: j.cg, alloc: j.asg.Alloc})
		}
	}
	a.mu.Unlock()
	live := map[int64]bool{}
	var gpus map[int]api.GPUSample
	var out []api.JobSample
	for _, j := range jobs {
		live[j.id] = true
		s := api.JobSample{JobID: j.id, Time: now.UTC()}
		got := false
		if j.cg != nil {
			st, err := j.cg.Stats()
			switch {
			case errors.Is(err, os.ErrNotExist):
				// Not started yet, or just ended.
			case err != nil:
				a.log.Debug("job stats", "job_id", j.id, "err", err)
			default:
				got = true
				m, seen := marks[j.id]
				if st.HasCPU {
					s.CPUSeconds = st.CPU.Seconds()
					if seen && now.After(m.at) && st.CPU >= m.cpu {
						pct := cpuPercent(st.CPU-m.cpu, now.Sub(m.at), j.alloc.CPUs)
						s.CPUPercent = &pct
					}
				}
				if st.HasMemory {
					s.MemoryUsed, s.MemoryUsage = st.Memory, st.Usage
					s.MemoryPeak = max(st.Peak, st.Usage, m.peak)
					s.MemoryLimit = st.Limit
					if s.MemoryLimit == 0 {
						s.MemoryLimit = j.alloc.Memory
					}
				}
				marks[j.id] = cpuMark{at: now, cpu: st.CPU, peak: s.MemoryPeak}
			}
		}
		if len(j.alloc.GPUs) > 0 && a.cfg.Monitor.NvidiaSMI != "" {
			if gpus == nil {
				gpus = a.gpuSamples(ctx)
			}
			for _, idx := range j.alloc.GPUs {
				if g, ok := gpus[idx]; ok {
					s.GPUs = append(s.GPUs, g)
					got = true
				}
			}
		}
		if got {
			out = append(out, s)
		}
	}
	for id := range marks {
		if !live[id] {
			delete(marks, id)
		}
	}
	return out
}

// cpuPercent is CPU time used over wall time, as a percentage of cpus
// (at least one).
func cpuPercent(used, wall time.Duration, cpus int) float64 {
	if wall <= 0 {
		return 0
	}
	p := float64(used) / float64(wall) / float64(max(cpus, 1)) * 100
	return float64(int64(p*10+0.5)) / 10 // one decimal is all anyone reads
}

// gpuQuery is what the sampler asks nvidia-smi.
const gpuQuery = "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total"

// gpuSamples asks nvidia-smi for every GPU's figures, by index; nil when it
// cannot tell (the error is logged).
func (a *Agent) gpuSamples(ctx context.Context) map[int]api.GPUSample {
	out, err := a.nvidiaSMI(ctx, gpuQuery)
	if err != nil {
		a.log.Debug("gpu metrics", "err", err)
		return map[int]api.GPUSample{}
	}
	gs, err := parseGPUMetrics(out)
	if err != nil {
		a.log.Debug("gpu metrics", "err", err)
	}
	m := make(map[int]api.GPUSample, len(gs))
	for _, g := range gs {
		m[g.Index] = g
	}
	return m
}

// nvidiaSMI runs nvidia-smi with a query, in CSV without header or units.
func (a *Agent) nvidiaSMI(ctx context.Context, query string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, a.cfg.Monitor.NvidiaSMI, query, "--format=csv,noheader,nounits")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// nvidia-smi says what is wrong on stdout as often as on stderr.
		msg := lastLine(append(out, stderr.Bytes()...))
		if msg != "" {
			return out, fmt.Errorf("nvidia-smi: %w: %s", err, msg)
		}
		return out, fmt.Errorf("nvidia-smi: %w", err)
	}
	return out, nil
}

// parseGPUMetrics reads `index, uuid, utilization.gpu [%], memory.used
// [MiB], memory.total [MiB]` lines. A field nvidia-smi cannot tell
// ("[N/A]", "[Not Supported]") reads as 0; a line that is not five fields,
// or whose index is not a number, is an error (the lines before it are
// returned).
func parseGPUMetrics(out []byte) ([]api.GPUSample, error) {
	var gs []api.GPUSample
	for i, line := range csvLines(out) {
		if len(line) != 5 {
			return gs, fmt.Errorf("agent: nvidia-smi metrics line %d: want 5 fields, got %d", i+1, len(line))
		}
		idx, err := strconv.Atoi(line[0])
		if err != nil {
			return gs, fmt.Errorf("agent: nvidia-smi metrics line %d: index %q", i+1, line[0])
		}
		util, _ := smiFloat(line[2])
		used, _ := smiFloat(line[3])
		total, _ := smiFloat(line[4])
		gs = append(gs, api.GPUSample{Index: idx, UUID: line[1], Util: util, MemoryUsed: int64(used * (1 << 20)), MemoryTotal: int64(total * (1 << 20))})
	}
	return gs, nil
}

// csvLines splits nvidia-smi's CSV output into trimmed fields, skipping
// blank lines. (No field of the queries used here holds a comma.)
func csvLines(out []byte) [][]string {
	var lines [][]string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Split(l, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		lines = append(lines, f)
	}
	return lines
}

// smiFloat reads a number of nvidia-smi's; ok is false for "[N/A]",
// "[Not Supported]", "N/A" and anything else not a number.
func smiFloat(s string) (v float64, ok bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v, err == nil
}

// lastLine is the last non-blank line of out, trimmed and bounded.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 512 {
				l = l[:512] + "…"
			}
			return l
		}
	}
	return ""
}
