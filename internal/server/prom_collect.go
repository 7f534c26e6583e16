package server

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/lifecycle"
)

// The series read from the cluster at each scrape. Their labels are
// bounded by what the cluster has, never by how many runs came and went:
// statuses, projects, users, Slurm's reason codes, fleets, nodes, GPU
// models and devices. Only with --metrics-per-run do the agents' samples
// come per job, labelled with their runs.

// sampleStale is how long a run's samples count after its last one came
// (agents sample every 5 s by default): a job whose node stopped sending
// them drops out instead of showing its last figures for ever.
const sampleStale = time.Minute

// clusterCollector makes the state's series at each scrape.
type clusterCollector struct {
	s      *Server
	perRun bool
	// projects are those that had active runs since the server started:
	// their berth_runs series stay, at 0, once their runs are gone.
	mu       sync.Mutex
	projects map[string]bool

	runs, pending, oldest, ages                      *prometheus.Desc
	nodes, cpus, cpusAlloc, mem, memAlloc            *prometheus.Desc
	gpus, gpusAlloc                                  *prometheus.Desc
	usage, projectShares, userShares                 *prometheus.Desc
	nodeCPUs, nodeMem                                *prometheus.Desc
	gpuUtil, gpuMem, gpuMemTotal                     *prometheus.Desc
	jobCPU, jobCPUSeconds, jobMem, jobPeak, jobLimit *prometheus.Desc
}

func newClusterCollector(s *Server, perRun bool) *clusterCollector {
	d := prometheus.NewDesc
	c := &clusterCollector{s: s, perRun: perRun, projects: map[string]bool{}}
	c.runs = d("berth_runs", "Active runs by status (submitted, provisioning, pulling, running, terminating, scheduled) and project; an array counts as the tasks it has made.",
		[]string{"status", "project"}, nil)
	c.pending = d("berth_pending_runs", "Waiting runs by pending reason (Slurm's code: Priority, Resources, Dependency, JobHeldUser, …; None until a pass saw them) and the fleets they may use (comma-separated; empty: any).",
		[]string{"reason", "fleet"}, nil)
	c.oldest = d("berth_pending_oldest_age_seconds", "Time since the longest-waiting run was submitted (0: none waits).", nil, nil)
	c.ages = d("berth_pending_age_seconds", "Ages of the runs waiting now, since their submission. A snapshot at each scrape, not a cumulative histogram: read the buckets as they are (histogram_quantile without rate).", nil, nil)
	c.nodes = d("berth_nodes", "Nodes by fleet, state (idle, busy, draining, drained, offline, unreachable) and last health report (ok, warning, failure).",
		[]string{"fleet", "state", "health"}, nil)
	c.cpus = d("berth_fleet_cpus", "CPUs of the fleet's registered nodes.", []string{"fleet"}, nil)
	c.cpusAlloc = d("berth_fleet_cpus_allocated", "CPUs of the fleet's nodes allocated to jobs.", []string{"fleet"}, nil)
	c.mem = d("berth_fleet_memory_bytes", "Memory of the fleet's registered nodes.", []string{"fleet"}, nil)
	c.memAlloc = d("berth_fleet_memory_allocated_bytes", "Memory of the fleet's nodes allocated to jobs.", []string{"fleet"}, nil)
	c.gpus = d("berth_fleet_gpus", "GPUs of the fleet's registered nodes, by model.", []string{"fleet", "model"}, nil)
	c.gpusAlloc = d("berth_fleet_gpus_allocated", "GPUs of the fleet's nodes allocated to jobs, by model.", []string{"fleet", "model"}, nil)
	c.usage = d("berth_fairshare_usage_cpu_seconds", "Past CPU-seconds of each project's user, decayed by the fairshare half-life: what fairshare weighs.",
		[]string{"project", "user"}, nil)
	c.projectShares = d("berth_fairshare_project_shares", "Fairshare shares of each project the policy file names.", []string{"project"}, nil)
	c.userShares = d("berth_fairshare_user_shares", "Fairshare shares of each user the policy file names, within their project.", []string{"project", "user"}, nil)
	c.nodeCPUs = d("berth_node_jobs_cpus_used", "CPUs the node's running jobs kept busy over their last sample period (each job's CPU use times its allocated CPUs, summed).",
		[]string{"node"}, nil)
	c.nodeMem = d("berth_node_jobs_memory_used_bytes", "Memory the node's running jobs hold (working set: charged memory less inactive page cache, summed).",
		[]string{"node"}, nil)
	// dcgm-exporter's labels, so that its series join these (on UUID).
	gpu := []string{"Hostname", "gpu", "UUID", "modelName"}
	job := []string{"run_id", "run", "job", "node", "project", "user"}
	if perRun {
		gpu = append(gpu, "run_id", "run", "job")
	}
	c.gpuUtil = d("berth_gpu_utilization_ratio", "GPU utilization of the running jobs' GPUs, 0-1 (DCGM_FI_DEV_GPU_UTIL / 100).", gpu, nil)
	c.gpuMem = d("berth_gpu_memory_used_bytes", "GPU memory used on the running jobs' GPUs (DCGM_FI_DEV_FB_USED, in bytes).", gpu, nil)
	c.gpuMemTotal = d("berth_gpu_memory_total_bytes", "GPU memory of the running jobs' GPUs (DCGM_FI_DEV_FB_TOTAL, in bytes).", gpu, nil)
	c.jobCPU = d("berth_job_cpu_utilization_ratio", "A running job's CPU use over its last sample period, as a fraction of its allocated CPUs (--metrics-per-run).", job, nil)
	c.jobCPUSeconds = d("berth_job_cpu_seconds_total", "CPU time a running job used since it started (--metrics-per-run).", job, nil)
	c.jobMem = d("berth_job_memory_used_bytes", "A running job's working set (--metrics-per-run).", job, nil)
	c.jobPeak = d("berth_job_memory_peak_bytes", "The most memory a running job was charged (--metrics-per-run).", job, nil)
	c.jobLimit = d("berth_job_memory_limit_bytes", "A running job's memory limit (--metrics-per-run).", job, nil)
	return c
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.runs, c.pending, c.oldest, c.ages, c.nodes, c.cpus, c.cpusAlloc, c.mem, c.memAlloc,
		c.gpus, c.gpusAlloc, c.usage, c.projectShares, c.userShares, c.nodeCPUs, c.nodeMem, c.gpuUtil, c.gpuMem, c.gpuMemTotal,
		c.jobCPU, c.jobCPUSeconds, c.jobMem, c.jobPeak, c.jobLimit} {
		ch <- d
	}
}

// activeStatuses are the statuses berth_runs always has a series of (0
// when no run is in it), for each project that had active runs.
var activeStatuses = func() (out []lifecycle.Status) {
	for _, st := range lifecycle.Statuses {
		if !st.Finished() {
			out = append(out, st)
		}
	}
	return out
}()

// waitingPart is how many waiting runs the collector reads per turn
// under the lock.
const waitingPart = 2000

// Collect reads the state under the lock, then makes the series.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	now := s.clock.Now()
	samples := s.jm.latest(now.Add(-sampleStale)) // its own lock, not s.mu
	ids := make([]int64, len(samples))
	for i, x := range samples {
		ids[i] = x.s.JobID
	}
	s.mu.Lock()
	f := s.Figures(now, waitBuckets)
	jobs := s.PlacedJobs(ids)
	waiting := s.WaitingIDs()
	s.unlock()
	// The waiting runs a part at a time, each part under the lock for
	// about a millisecond: a long queue's scrape does not hold up
	// submissions (a run that starts or ends meanwhile is left out).
	for len(waiting) > 0 {
		part := waiting[:min(len(waiting), waitingPart)]
		waiting = waiting[len(part):]
		s.mu.Lock()
		s.AddWaiting(&f, part, now, waitBuckets)
		s.unlock()
	}

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- constMetric(d, prometheus.GaugeValue, v, labels...)
	}
	c.collectRuns(f, now, gauge, ch)
	c.collectNodes(f, gauge)
	for a, v := range f.Usage {
		gauge(c.usage, v, a.Project, a.User)
	}
	if sh := s.Rules().Shares; sh != nil {
		for p, n := range sh.Projects {
			gauge(c.projectShares, float64(n), p)
		}
		for p, users := range sh.Users {
			for u, n := range users {
				gauge(c.userShares, float64(n), p, u)
			}
		}
	}
	c.collectSamples(f, samples, jobs, gauge, ch)
}

// constMetric is a series, or the error that makes it one the scrape
// reports (a label value that is not UTF-8) instead of a panic.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

func (c *clusterCollector) collectRuns(f control.Figures, now time.Time, gauge func(*prometheus.Desc, float64, ...string), ch chan<- prometheus.Metric) {
	c.mu.Lock()
	for g := range f.Runs {
		c.projects[g.Project] = true
	}
	projects := slices.Collect(maps.Keys(c.projects))
	c.mu.Unlock()
	for _, p := range projects {
		for _, st := range activeStatuses {
			gauge(c.runs, float64(f.Runs[control.RunGroup{Status: st, Project: p}]), string(st), p)
		}
	}
	for g, n := range f.Waiting {
		gauge(c.pending, float64(n), g.Reason, g.Fleets)
	}
	oldest := 0.0
	if !f.Oldest.IsZero() {
		oldest = max(now.Sub(f.Oldest).Seconds(), 0)
	}
	gauge(c.oldest, oldest)
	buckets := make(map[float64]uint64, len(waitBuckets))
	var n uint64
	for i, b := range waitBuckets {
		n += f.Ages[i]
		buckets[b] = n
	}
	n += f.Ages[len(waitBuckets)]
	h, err := prometheus.NewConstHistogram(c.ages, n, f.AgeSum, buckets)
	if err != nil {
		h = prometheus.NewInvalidMetric(c.ages, err)
	}
	ch <- h
}

func (c *clusterCollector) collectNodes(f control.Figures, gauge func(*prometheus.Desc, float64, ...string)) {
	type state struct{ fleet, state, health string }
	type res struct {
		cpus, usedCPUs  int
		memory, usedMem int64
		gpus, gpusInUse map[string]int
	}
	states := map[state]int{}
	fleets := map[string]*res{}
	for _, n := range f.Nodes {
		states[state{n.Fleet, n.State, n.Health}]++
		r := fleets[n.Fleet]
		if r == nil {
			r = &res{gpus: map[string]int{}, gpusInUse: map[string]int{}}
			fleets[n.Fleet] = r
		}
		r.cpus += n.CPUs
		r.usedCPUs += n.UsedCPUs
		r.memory += n.Memory
		r.usedMem += n.UsedBytes
		for _, g := range n.GPUs {
			r.gpus[g.Model]++
			if g.Used {
				r.gpusInUse[g.Model]++
			}
		}
	}
	for st, n := range states {
		gauge(c.nodes, float64(n), st.fleet, st.state, st.health)
	}
	for name, r := range fleets {
		gauge(c.cpus, float64(r.cpus), name)
		gauge(c.cpusAlloc, float64(r.usedCPUs), name)
		gauge(c.mem, float64(r.memory), name)
		gauge(c.memAlloc, float64(r.usedMem), name)
		for model, n := range r.gpus {
			gauge(c.gpus, float64(n), name, model)
			gauge(c.gpusAlloc, float64(r.gpusInUse[model]), name, model)
		}
	}
}

// collectSamples makes the series of the running jobs' latest samples:
// summed per node, per GPU, and with --metrics-per-run per job.
func (c *clusterCollector) collectSamples(f control.Figures, samples []sample, jobs []control.JobFigures, gauge func(*prometheus.Desc, float64, ...string), ch chan<- prometheus.Metric) {
	type nodeSum struct{ cpus, memory float64 }
	sums := make(map[string]*nodeSum, len(f.Nodes))
	models := map[string]map[int]string{}
	for _, n := range f.Nodes {
		sums[n.Name] = &nodeSum{}
		for _, g := range n.GPUs {
			if models[n.Name] == nil {
				models[n.Name] = map[int]string{}
			}
			models[n.Name][g.Index] = g.Model
		}
	}
	byID := make(map[int64]int, len(samples))
	for i, x := range samples {
		byID[x.s.JobID] = i
	}
	type device struct {
		node string
		gpu  int
	}
	seen := map[device]bool{}
	for _, j := range jobs {
		x := samples[byID[j.ID]].s
		sum := sums[j.Node]
		if sum == nil {
			continue // its node left meanwhile
		}
		if x.CPUPercent != nil {
			sum.cpus += *x.CPUPercent / 100 * float64(j.CPUs)
		}
		sum.memory += float64(x.MemoryUsed)
		runID, num := strconv.FormatInt(j.RunID, 10), strconv.Itoa(j.Num)
		for _, g := range x.GPUs {
			dev := device{j.Node, g.Index}
			if seen[dev] {
				continue // a GPU is one job's at a time: a stale sample's
			}
			seen[dev] = true
			labels := []string{j.Node, strconv.Itoa(g.Index), g.UUID, models[j.Node][g.Index]}
			if c.perRun {
				labels = append(labels, runID, j.Run, num)
			}
			gauge(c.gpuUtil, g.Util/100, labels...)
			gauge(c.gpuMem, float64(g.MemoryUsed), labels...)
			gauge(c.gpuMemTotal, float64(g.MemoryTotal), labels...)
		}
		if !c.perRun {
			continue
		}
		labels := []string{runID, j.Run, num, j.Node, j.Project, j.User}
		if x.CPUPercent != nil {
			gauge(c.jobCPU, *x.CPUPercent/100, labels...)
		}
		ch <- constMetric(c.jobCPUSeconds, prometheus.CounterValue, x.CPUSeconds, labels...)
		if x.MemoryUsed > 0 || x.MemoryLimit > 0 {
			gauge(c.jobMem, float64(x.MemoryUsed), labels...)
			gauge(c.jobPeak, float64(x.MemoryPeak), labels...)
		}
		if x.MemoryLimit > 0 {
			gauge(c.jobLimit, float64(x.MemoryLimit), labels...)
		}
	}
	for name, sum := range sums {
		gauge(c.nodeCPUs, sum.cpus, name)
		gauge(c.nodeMem, sum.memory, name)
	}
}

// latest is each job's newest sample (its JobID set) of the runs sampled
// since then.
func (m *metricsStore) latest(since time.Time) []sample {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sample
	for run, rs := range m.runs {
		if rs.last.Before(since) {
			continue
		}
		for job, r := range rs.jobs {
			if len(r.buf) == 0 {
				continue
			}
			k := r.next - 1 // the newest: before the next to overwrite, or the last appended
			if k < 0 {
				k = len(r.buf) - 1
			}
			x := r.buf[k]
			x.JobID = job
			out = append(out, sample{run: run, s: x})
		}
	}
	return out
}
