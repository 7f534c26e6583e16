//go:build !slim

package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

func newBenchAgentCmd() *cobra.Command {
	var jobs int
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "The agent's overhead per running job: memory and CPU of the agent and the jobs' supervisors",
		Long: `Starts a server and one agent (separate processes; the agent declares --jobs CPUs), measures
the agent idle, then starts --jobs runs of one CPU that sleep, and once all run measures again over
--interval: the agent's resident memory (RSS) and CPU time, and those of the jobs' supervisors
(berth shim, one per job: RSS, and PSS, which shares their common pages among them). The jobs'
own processes (bash, sleep) are not counted. The runs are aborted at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobs < 1 {
				return errors.New("--jobs: want at least 1")
			}
			return benchAgent(cmd.Context(), cmd, jobs, interval)
		},
	}
	cmd.Flags().IntVar(&jobs, "jobs", 50, "sleeping jobs to run on the node")
	cmd.Flags().DurationVar(&interval, "interval", 10*time.Second, "how long to measure CPU time at steady state")
	return cmd
}

func benchAgent(ctx context.Context, cmd *cobra.Command, jobs int, interval time.Duration) (err error) {
	b, err := startBenchServer(ctx, false)
	if err != nil {
		return err
	}
	defer b.stop()
	if err := b.startAgent("bench-node", "--cpus", strconv.Itoa(jobs)); err != nil {
		return err
	}
	if err := b.waitNodes(ctx, 1); err != nil {
		return err
	}
	agentPid := b.kids[len(b.kids)-1].Process.Pid
	time.Sleep(2 * time.Second) // the warm supervisors start
	idle := sampleProcs(agentPid)
	idleCPU := measureCPU(agentPid, interval)

	var ids []int64
	defer func() {
		// The jobs outlive the agent by design: end them before the server goes.
		if cerr := abortRuns(context.Background(), b.c, ids); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t0 := time.Now()
	t := benchTask("sleep 3600")
	for range jobs {
		run, err := b.c.Submit(ctx, api.SubmitRequest{Spec: t})
		if err != nil {
			return err
		}
		ids = append(ids, run.ID)
	}
	for {
		running, err := b.c.Runs(ctx, client.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, r := range running {
			if r.Status == api.StatusRunning {
				n++
			}
		}
		if n == jobs {
			break
		}
		if time.Since(t0) > 2*time.Minute {
			return fmt.Errorf("bench: %d of %d runs running after 2 minutes", n, jobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	allRunning := time.Since(t0)
	time.Sleep(2 * time.Second) // let the start-up work settle
	busy := sampleProcs(agentPid)
	if len(busy.shims) < jobs {
		return fmt.Errorf("bench: %d job supervisors found for %d jobs", len(busy.shims), jobs)
	}
	cpu := measureCPU(agentPid, interval)

	mb := func(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
	per := func(kb int64) string { return fmt.Sprintf("%.2f MB", float64(kb)/1024/float64(jobs)) }
	pct := func(d time.Duration) string { return fmt.Sprintf("%.3f%%", 100*d.Seconds()/interval.Seconds()) }
	var shimRSS, shimPSS int64
	for _, s := range busy.shims {
		shimRSS += s.rss
		shimPSS += s.pss
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "agent: %d sleeping jobs on one node (%s); all running %s after the first submission\n", jobs, cgroupsText(), ms(allRunning))
	fmt.Fprintf(out, "  agent memory: RSS %s idle, %s with the jobs (%s per job); PSS %s, %s\n",
		mb(idle.agent.rss), mb(busy.agent.rss), per(busy.agent.rss-idle.agent.rss), mb(idle.agent.pss), mb(busy.agent.pss))
	fmt.Fprintf(out, "  supervisors: %d job shims, RSS %s each on average (%s in all), PSS %s each (%s in all); %d warm shims\n",
		len(busy.shims), per(shimRSS), mb(shimRSS), per(shimPSS), mb(shimPSS), len(busy.warm))
	fmt.Fprintf(out, "  memory per job (agent's growth + its shim's PSS): %s\n", per(busy.agent.rss-idle.agent.rss+shimPSS))
	fmt.Fprintf(out, "  CPU over %s: agent %s idle, %s with the jobs; all job shims %s (%s per job)\n",
		interval, pct(idleCPU.agent), pct(cpu.agent), pct(cpu.shims), pct(cpu.shims/time.Duration(jobs)))
	return nil
}

func cgroupsText() string {
	if benchNoCgroups {
		return "no cgroups"
	}
	return "a cgroup per job where the node has them"
}

// abortRuns aborts the runs and waits until they have all ended.
func abortRuns(ctx context.Context, c *client.Client, ids []int64) error {
	for _, id := range ids {
		if _, err := c.Stop(ctx, fmt.Sprint(id), true); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		active, err := c.Runs(ctx, client.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(active) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("bench: runs still active a minute after they were aborted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procMem is one process's memory, in kB.
type procMem struct{ rss, pss int64 }

// procSample is the agent's memory and its supervisors', by kind.
type procSample struct {
	agent       procMem
	shims, warm []procMem // supervisors of jobs, and those waiting for one
}

func sampleProcs(agentPid int) procSample {
	s := procSample{agent: memOf(agentPid)}
	for _, pid := range shimsOf(agentPid) {
		if hasJob(pid) {
			s.shims = append(s.shims, memOf(pid))
		} else {
			s.warm = append(s.warm, memOf(pid))
		}
	}
	return s
}

// hasJob tells a shim that supervises a job, which works in the job's
// directory (DATA/jobs/ID), from a warm one still waiting for its job.
func hasJob(pid int) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return err == nil && filepath.Base(filepath.Dir(cwd)) == "jobs"
}

type cpuSample struct{ agent, shims time.Duration }

// measureCPU is the CPU time the agent and its job shims use over d.
func measureCPU(agentPid int, d time.Duration) cpuSample {
	read := func() (agent, shims time.Duration) {
		agent = cpuOf(agentPid)
		for _, pid := range shimsOf(agentPid) {
			if hasJob(pid) {
				shims += cpuOf(pid)
			}
		}
		return agent, shims
	}
	a0, s0 := read()
	time.Sleep(d)
	a1, s1 := read()
	return cpuSample{agent: max(a1-a0, 0), shims: max(s1-s0, 0)}
}

// shimsOf lists the agent's children that are `berth shim` processes.
func shimsOf(agentPid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || statusField(pid, "PPid") != int64(agentPid) {
			continue
		}
		if args := cmdlineOf(pid); len(args) > 1 && args[1] == "shim" {
			out = append(out, pid)
		}
	}
	return out
}

func cmdlineOf(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// statusField reads a number from /proc/PID/status ("VmRSS", "PPid"); -1
// when absent.
func statusField(pid int, name string) int64 {
	return fieldOf(fmt.Sprintf("/proc/%d/status", pid), name)
}

func fieldOf(path, name string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == name {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

func memOf(pid int) procMem {
	return procMem{rss: statusField(pid, "VmRSS"), pss: fieldOf(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss")}
}

// cpuOf is the CPU time of every thread of pid, from the scheduler's
// nanosecond counters (schedstat), else from /proc/PID/stat's ticks.
func cpuOf(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	ok := false
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				total += time.Duration(ns)
				ok = true
			}
		}
	}
	if ok {
		return total
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command's closing parenthesis: utime and stime are
	// the 12th and 13th, in ticks of 1/100 s (Linux's USER_HZ).
	if i := bytes.LastIndexByte(b, ')'); i >= 0 {
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			return time.Duration(u+s) * 10 * time.Millisecond
		}
	}
	return 0
}
