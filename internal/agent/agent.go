package agent

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// Config says where an agent's server is and what its host offers.
type Config struct {
	Server  string
	Token   string
	Name    string
	DataDir string
	// Addr is the address other nodes reach this one at; empty: the local
	// address of the route to the server.
	Addr string
	// Fleet is the fleet (Slurm: partition) the node belongs to.
	Fleet string
	// Features are the node's features (Slurm's node features).
	Features []string
	// Blocks splits the node in equal blocks (BlocksAuto: one per GPU, 1
	// without); 0: as its fleet says.
	Blocks int
	// CPUs, Memory and GPUs declare resources instead of detecting them
	// (0 / nil: detect).
	CPUs         int
	Memory       int64
	GPUs         []api.GPU
	DeclaredGPUs bool
	// ShimCommand starts a job's supervisor; the job directory is appended.
	ShimCommand []string
	// LogTick is how often output of running jobs is shipped (default 100ms).
	LogTick time.Duration
	// NoCgroups runs jobs without control groups: no limits are enforced,
	// and the node says so.
	NoCgroups bool
	Logger    *slog.Logger
	Version   string
	// Monitor: metrics of running jobs and the node's health checks
	// (metrics.go, health.go).
	Monitor Monitoring
	// Socket is where the agent listens for its host's clients, who need
	// no token there (socket.go; "" or "none": no socket).
	Socket string
	// RunAsAgent runs the jobs this agent cannot run as their user (it is
	// not root, or their user has no account here) as the agent's user;
	// without it they fail to start (runas.go).
	RunAsAgent bool
	// SpoolDir is where an agent running as root keeps the directories of
	// its jobs' users (default /var/spool/berth; runas.go).
	SpoolDir string
	// Clock tells the agent the time (nil: the real clock); tests give a
	// fake one. The job's supervisor, a process of its own, times the job
	// by the real clock.
	Clock Clock
	// PythonImages are the images of Python versions ("3.12" →
	// "python:3.12-slim"; "*" any version, {version} in it replaced) for
	// runs with `python:` and no image, and NvccImage that of `nvcc:
	// true`, used where the node has a container engine (runtime.go).
	PythonImages map[string]string
	NvccImage    string
	// PythonVenv: a `python:` run on the host gets a virtual environment
	// of its own (runtime.go).
	PythonVenv bool
}

// Clock tells the time.
type Clock interface{ Now() time.Time }

type realClock struct{}

// Now keeps the monotonic reading (metrics' rates are differences).
func (realClock) Now() time.Time { return time.Now() }

// now is the agent's time, in UTC, for what it records and reports.
func (a *Agent) now() time.Time { return a.cfg.Clock.Now().UTC() }

// Agent runs the jobs the server assigns to its node and reports on them.
type Agent struct {
	cfg  Config
	c    *client.Client
	log  *slog.Logger
	info api.NodeInfo
	// cg is where jobs' control groups go; nil: jobs run without (the node
	// info says why). prefix names this agent's groups.
	cg     *cgroup.Host
	prefix string

	mu   sync.Mutex
	jobs map[int64]*localJob
	kick chan struct{}
	// diskKick has the health loop look at the disk now (health.go).
	diskKick chan struct{}
	// warm holds shims started ahead of need; refilling and stopping are
	// guarded by mu.
	warm      chan *warmShim
	refilling bool
	stopping  bool
}

// localJob is what the agent knows of one job on this node.
type localJob struct {
	id          int64
	dir         string
	asg         api.Assignment
	cg          *cgroup.Spec // the job's control group, nil without
	out         *os.File
	acked       int64 // bytes of output.log the server holds
	synced      bool  // acked came from the server
	started     time.Time
	startedSent bool
	exit        *shimExit // set once the shim has exited
	exitSent    bool
	stopSent    int
	shimPid     int
	signalled   bool // the agent signalled its shim: that shim takes no other job
	shimStarts  int  // shims that ended before starting the job (see finished)
	rerun       bool // found after a restart, never started: start it on the server's word
	orphan      bool // the server no longer knows it: stop it, report nothing
	torn        bool // its output ends in a frame its shim could not finish, cut off
}

// New prepares an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("agent: name: %w", err)
		}
		cfg.Name = h
	}
	if cfg.DataDir == "" {
		return nil, errors.New("agent: a data directory is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if len(cfg.ShimCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("agent: own executable: %w", err)
		}
		cfg.ShimCommand = []string{exe, "shim"}
	}
	if cfg.LogTick == 0 {
		cfg.LogTick = 100 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Agent{
		cfg:      cfg,
		prefix:   groupPrefix(cfg.Name, cfg.DataDir),
		c:        client.New(cfg.Server, cfg.Token),
		log:      cfg.Logger.With("node", cfg.Name),
		jobs:     map[int64]*localJob{},
		kick:     make(chan struct{}, 1),
		diskKick: make(chan struct{}, 1),
		warm:     make(chan *warmShim, idleShims),
	}, nil
}

// Run joins the cluster and serves it until ctx is done. Jobs keep running
// when Run returns; a later Run with the same data directory finds them again.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.detect(ctx); err != nil {
		return err
	}
	a.detectContainers(ctx) // agent_container.go
	a.detectRuntimes()      // runtime.go
	if err := os.MkdirAll(filepath.Join(a.cfg.DataDir, "jobs"), 0o700); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := a.restore(); err != nil {
		return err
	}
	a.sweepGroups()
	a.log.Info("agent starting", "server", a.cfg.Server, "cpus", a.info.CPUs, "memory", a.info.Memory,
		"gpus", len(a.info.GPUs), "jobs_found", len(a.jobs), "limits", a.info.Limits)
	go a.sender(ctx)
	a.startMonitoring(ctx)
	a.serveSocket(ctx)
	a.mu.Lock()
	a.refillShims()
	a.mu.Unlock()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := a.connect(ctx)
		if ctx.Err() != nil {
			break
		}
		a.log.Warn("stream to server lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	a.mu.Lock()
	a.stopping = true
	for _, j := range a.jobs {
		if j.out != nil {
			j.out.Close()
			j.out = nil
		}
	}
	a.mu.Unlock()
	a.releaseWarm()
	return nil
}

// releaseWarm lets the warm shims not taken yet go.
func (a *Agent) releaseWarm() {
	for {
		select {
		case w := <-a.warm:
			w.release()
		default:
			return
		}
	}
}

func (a *Agent) detect(ctx context.Context) error {
	cpus, mem, gpus, err := Detect(ctx)
	if err != nil {
		return err
	}
	declared := false
	if a.cfg.CPUs > 0 {
		cpus, declared = a.cfg.CPUs, true
	}
	if a.cfg.Memory > 0 {
		mem, declared = a.cfg.Memory, true
	}
	if a.cfg.DeclaredGPUs {
		gpus, declared = a.cfg.GPUs, true
	}
	addr := a.cfg.Addr
	if addr == "" {
		addr = routeAddr(a.cfg.Server)
	}
	version, limits := a.detectCgroups()
	blocks := a.cfg.Blocks
	if blocks == BlocksAuto {
		blocks = max(1, len(gpus))
	}
	a.info = api.NodeInfo{Name: a.cfg.Name, Fleet: a.cfg.Fleet, Features: a.cfg.Features, Addr: addr, CPUs: cpus, Memory: mem, GPUs: gpus, Declared: declared,
		Cgroups: version, Limits: limits, RunAs: a.runAsMode(), Version: a.cfg.Version, Disk: diskLimit(), Blocks: blocks, Mounts: mountNamespaces()}
	return nil
}

// BlocksAuto is Config.Blocks for `--blocks auto`.
const BlocksAuto = -1

// routeAddr is the local address this host uses to reach the server.
// firstURL is the first of the server's URLs (several: replicas).
func firstURL(server string) string {
	if urls := client.SplitURLs(server); len(urls) > 0 {
		return urls[0]
	}
	return server
}

func routeAddr(server string) string {
	u, err := url.Parse(firstURL(server))
	if err != nil {
		return "127.0.0.1"
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		port = "80"
	}
	c, err := net.Dial("udp", net.JoinHostPort(host, port))
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// connect registers and serves one stream until it breaks.
func (a *Agent) connect(ctx context.Context) error {
	if err := a.c.Register(ctx, a.info); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The server pings every few seconds; silence means a dead connection.
	alive := make(chan struct{}, 1)
	go func() {
		t := time.NewTimer(45 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-alive:
				t.Reset(45 * time.Second)
			case <-t.C:
				cancel()
				return
			}
		}
	}()
	return a.c.AgentStream(sctx, a.cfg.Name, func(m api.AgentMessage) error {
		select {
		case alive <- struct{}{}:
		default:
		}
		switch m.Type {
		case "sync":
			a.sync(m.Jobs)
		case "assign":
			for _, j := range m.Jobs {
				a.assign(j)
			}
		case "stop":
			if m.Stop != nil {
				a.stop(m.Stop.JobID, m.Stop.Abort)
			}
		case "signal":
			if m.Kill != nil {
				a.forward(*m.Kill)
			}
		case "limit":
			if m.Limit != nil {
				a.setLimit(*m.Limit) // timelimit.go
			}
		case "tunnel":
			if m.Tunnel != nil {
				go a.tunnel(ctx, *m.Tunnel) // tunnel.go
			}
		}
		return nil
	})
}

func (a *Agent) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// sync reconciles the jobs on this node with the server's list of them.
func (a *Agent) sync(list []api.Assignment) {
	a.mu.Lock()
	seen := map[int64]bool{}
	for _, asg := range list {
		seen[asg.JobID] = true
		j, ok := a.jobs[asg.JobID]
		rerun := ok && j.rerun
		if rerun {
			a.removeLocked(j)
			ok = false
		}
		switch {
		case ok:
			j.acked, j.synced = asg.LogSize, true
			if asg.Stop > 0 {
				a.signalLocked(j, asg.Stop == 2)
			}
			// A time limit changed while this agent was away.
			a.limitLocked(j, asg.MaxDuration)
		case asg.Stop > 0:
			// Stopped before this node ever started it.
			reason := exitStopped
			if asg.Stop == 2 {
				reason = exitAborted
			}
			a.jobs[asg.JobID] = &localJob{id: asg.JobID, asg: asg, acked: asg.LogSize, synced: true, startedSent: true,
				exit: &shimExit{Reason: reason, Message: "stopped before it started", FinishedAt: a.now()}}
		case asg.Status == api.StatusProvisioning || rerun:
			// New, or found after a restart never started: nothing ran yet.
			a.startLocked(asg)
		default:
			// The server believes it runs here, but this node has no trace of it.
			j := &localJob{id: asg.JobID, asg: asg, acked: asg.LogSize, synced: true, startedSent: true,
				exit: &shimExit{ExitCode: -1, Reason: api.ReasonLostByAgent, Message: "the node has no record of this job", FinishedAt: a.now()}}
			a.jobs[asg.JobID] = j
		}
	}
	for id, j := range a.jobs {
		if seen[id] {
			continue
		}
		if j.exit != nil || j.rerun {
			a.removeLocked(j)
			continue
		}
		a.log.Warn("stopping a job the server does not know", "job_id", id)
		j.orphan = true
		a.signalLocked(j, true)
	}
	a.mu.Unlock()
	a.poke()
}

func (a *Agent) assign(asg api.Assignment) {
	a.mu.Lock()
	if _, ok := a.jobs[asg.JobID]; !ok {
		a.startLocked(asg)
	}
	a.mu.Unlock()
	// No poke: the start goes out with the next tick, or together with the
	// end of a job that ends sooner, which saves a round trip per short job.
}

func (a *Agent) stop(id int64, abort bool) {
	a.mu.Lock()
	if j, ok := a.jobs[id]; ok {
		a.signalLocked(j, abort)
	}
	a.mu.Unlock()
}

// forward asks a running job's shim to send the job a signal: the signal in
// the job directory's "signal" file, then SIGUSR1 to the shim.
func (a *Agent) forward(k api.KillJob) {
	a.mu.Lock()
	defer a.mu.Unlock()
	j, ok := a.jobs[k.JobID]
	if !ok || j.exit != nil || j.shimPid == 0 {
		return
	}
	text := strconv.Itoa(k.Signal)
	switch {
	case k.BatchOnly:
		text = "B:" + text
	case k.StepsOnly:
		text = "S:" + text
	}
	if err := writeFileAtomic(filepath.Join(j.dir, fileSignal), []byte(text)); err != nil {
		a.log.Warn("record a signal for the job", "job_id", j.id, "err", err)
		return
	}
	a.signalShimLocked(j, sigForward)
}

// signalShimLocked sends the job's shim sig. A shim the agent signalled is
// not handed another job (see recycle): the signal is for this job only.
func (a *Agent) signalShimLocked(j *localJob, sig syscall.Signal) {
	j.signalled = true
	if err := unix.Kill(j.shimPid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		a.log.Error("signal shim", "job_id", j.id, "err", err)
	}
}

// signalLocked asks a job's shim to stop: a note in the job directory (read
// by a shim that has not started the job yet), then the signal. A request is
// sent again when repeated: signals are idempotent for the shim.
func (a *Agent) signalLocked(j *localJob, abort bool) {
	level := 1
	sig := sigStop
	if abort {
		level, sig = 2, sigAbort
	}
	if j.exit != nil || j.shimPid == 0 {
		return
	}
	j.stopSent = max(j.stopSent, level)
	if err := writeFileAtomic(filepath.Join(j.dir, fileStop), []byte(strconv.Itoa(j.stopSent))); err != nil {
		a.log.Warn("record stop request", "job_id", j.id, "err", err)
	}
	a.signalShimLocked(j, sig)
}

// startLocked writes the job's directory and starts its shim.
func (a *Agent) startLocked(asg api.Assignment) {
	dir := filepath.Join(a.cfg.DataDir, "jobs", strconv.FormatInt(asg.JobID, 10))
	j := &localJob{id: asg.JobID, dir: dir, asg: asg, cg: a.jobGroup(asg.JobID, asg.Alloc), acked: asg.LogSize, synced: true, started: a.now()}
	a.jobs[asg.JobID] = j
	fail := func(err error) {
		a.log.Error("cannot start job", "job_id", asg.JobID, "err", err)
		j.exit = &shimExit{ExitCode: 127, Reason: exitStartFailed, Message: err.Error(), StartedAt: j.started, FinishedAt: a.now()}
		// A full disk fails every job sent here: the node must say so.
		a.checkDiskSoon()
	}
	acct, err := a.account(asg) // runas.go
	if err != nil {
		fail(err)
		return
	}
	if acct.cred != nil && j.cg != nil {
		j.cg.Owner = acct.cred.UID
	}
	image, bins, err := a.runtimeOf(asg) // runtime.go: python, nvcc
	if err != nil {
		fail(err)
		return
	}
	if image != "" {
		_, _ = useRuntime(&asg, image, nil, "", nil)
		j.asg = asg
	}
	venv := a.venvFor(asg, bins) // runtime_venv.go
	if venv {
		asg.Commands = append([]string{venvCreate}, asg.Commands...)
	}
	workDir := asg.WorkingDir
	mk := dir
	if workDir == "" || asg.Container != nil { // a container's working_dir is in the container
		workDir = filepath.Join(dir, "work")
		mk = workDir
	}
	if acct.cred != nil && asg.Container == nil {
		mk = dir // the job's own files are in the user's directory
	}
	if err := os.MkdirAll(mk, 0o700); err != nil {
		fail(err)
		return
	}
	sp := shimSpec{Script: jobScript(asg), Shell: asg.Shell, Dir: workDir, MaxDuration: asg.MaxDuration, Grace: asg.Grace, Assignment: asg,
		Cgroup: j.cg, Cred: acct.cred, Server: a.cfg.Server}
	var extra []string
	if acct.cred != nil && asg.Container == nil {
		// The user's own directory, with the script written: runas.go.
		sp.UserDir, sp.Dir, extra, err = a.makeUserDir(asg, acct.cred, sp.Script)
	} else {
		extra, err = writeHostfile(dir, asg) // dist.go
		if abs, aerr := filepath.Abs(dir); err == nil && aerr == nil {
			// The job's own directory, removed with the job: a place for
			// its files (the Slurm front end keeps a batch script there).
			extra = append(extra, "BERTH_JOB_DIR="+abs)
		}
	}
	if err != nil {
		fail(err)
		return
	}
	// One file holds what the shim runs and what the agent needs to find
	// the job again after a restart.
	sp.Env = jobEnv(asg, append(append(extra, acct.env...), a.jobCredEnv(asg)...)...)
	if len(bins) > 0 {
		if sp.Env, err = useRuntime(&asg, "", bins, cmp.Or(sp.UserDir, dir), sp.Env); err != nil {
			fail(err)
			return
		}
		if venv {
			sp.Env = withVenv(cmp.Or(sp.UserDir, dir), sp.Env)
		}
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileSpec), sp); err != nil {
		fail(err)
		return
	}
	sh, err := a.takeShim(dir)
	if err != nil {
		fail(err)
		return
	}
	j.shimPid = sh.cmd.Process.Pid
	go a.await(j, sh)
}

// await waits for the end of j's job: a reusable shim names its directory
// when the job is done, and then goes back among the warm shims; any shim's
// exit ends the job too (one that died, or one not reused).
func (a *Agent) await(j *localJob, sh *warmShim) {
	if sh.report != nil {
		if _, err := sh.report.ReadString('\n'); err == nil {
			a.finishedBy(j, true)
			a.recycle(j, sh)
			return
		}
	}
	_ = sh.cmd.Wait()
	if sh.rfile != nil {
		sh.rfile.Close()
	}
	a.finished(j)
}

// recycle puts a shim that reported its job done back among the warm ones,
// unless the agent signalled it during the job (a signal meant for that job
// must not reach the next), the agent is stopping, or enough wait already.
func (a *Agent) recycle(j *localJob, sh *warmShim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j.signalled || a.stopping {
		sh.release()
		return
	}
	a.keepWarmLocked(sh)
}

// keepWarmLocked puts w among the warm shims, or ends it when idleShims
// already wait.
func (a *Agent) keepWarmLocked(w *warmShim) {
	select {
	case a.warm <- w:
	default:
		w.release()
	}
}

// warmShims is how many shims the agent starts ahead of need. Starting the
// binary is most of a trivial job's cost; a warm shim takes it off the path
// from an assignment to a running job, and a shim that finished a job is
// warm again (idleShims bounds how many wait so).
const (
	warmShims = 2
	idleShims = 8
)

// takeShim hands dir to a warm shim, or starts a shim for it when none is
// ready, and returns the shim. Call with a.mu held.
func (a *Agent) takeShim(dir string) (*warmShim, error) {
	defer a.refillShims()
	for {
		select {
		case w := <-a.warm:
			// The pid goes on record before the shim learns its job, so
			// that a restarted agent always finds it.
			if err := writeFileAtomic(filepath.Join(dir, fileShimID), []byte(strconv.Itoa(w.cmd.Process.Pid))); err != nil {
				a.keepWarmLocked(w) // it is still warm
				return nil, err
			}
			if _, err := io.WriteString(w.in, dir+"\n"); err == nil {
				return w, nil
			}
			w.release()
			continue
		default:
		}
		cmd, _, _, err := a.startShim(dir)
		if err != nil {
			return nil, err
		}
		// The shim writes it too, but a restart must not depend on how far
		// the shim got.
		if err := writeFileAtomic(filepath.Join(dir, fileShimID), []byte(strconv.Itoa(cmd.Process.Pid))); err != nil {
			a.log.Warn("record shim pid", "dir", dir, "err", err)
		}
		return &warmShim{cmd: cmd}, nil
	}
}

// warmShim is a shim started ahead of need (in: where it is told its job
// directories; report: where it names those it is done with), or one
// started for its job (cmd only).
type warmShim struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	report *bufio.Reader
	rfile  *os.File
}

// release ends a warm shim: it exits when its input closes.
func (w *warmShim) release() {
	if w.in != nil {
		w.in.Close()
	}
	go func() {
		_ = w.cmd.Wait()
		if w.rfile != nil {
			w.rfile.Close()
		}
	}()
}

// startShim starts `berth shim ARG` in a session of its own, so that it
// outlives the agent and gets none of its signals. A reusable warm shim
// (reuseArg) gets a pipe for its input and one for its reports (its fd 3).
func (a *Agent) startShim(arg string) (*exec.Cmd, io.WriteCloser, *os.File, error) {
	logf, err := os.OpenFile(filepath.Join(a.cfg.DataDir, "shims.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, nil, err
	}
	defer logf.Close()
	cmd := exec.Command(a.cfg.ShimCommand[0], append(a.cfg.ShimCommand[1:], arg)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var in io.WriteCloser
	var report, reportW *os.File
	if arg == warmArg || arg == reuseArg {
		if in, err = cmd.StdinPipe(); err != nil {
			return nil, nil, nil, err
		}
	} else {
		// Working in the job's directory from its first instant, the shim
		// is found there by a restarted agent even if this agent dies
		// before it records the shim's pid.
		cmd.Dir = arg
	}
	if arg == reuseArg {
		if report, reportW, err = os.Pipe(); err != nil {
			in.Close()
			return nil, nil, nil, err
		}
		cmd.ExtraFiles = []*os.File{reportW} // fd 3: reportFD
	}
	err = cmd.Start()
	if reportW != nil {
		reportW.Close()
	}
	if err != nil {
		if report != nil {
			report.Close()
		}
		return nil, nil, nil, err
	}
	return cmd, in, report, nil
}

// refillShims starts warm shims in the background up to warmShims.
func (a *Agent) refillShims() {
	if a.refilling || a.stopping {
		return
	}
	a.refilling = true
	go func() {
		for {
			a.mu.Lock()
			if len(a.warm) >= warmShims || a.stopping {
				a.refilling = false
				a.mu.Unlock()
				return
			}
			a.mu.Unlock()
			cmd, in, report, err := a.startShim(reuseArg)
			if err != nil {
				a.log.Error("start a warm shim", "err", err)
				a.mu.Lock()
				a.refilling = false
				a.mu.Unlock()
				return
			}
			w := &warmShim{cmd: cmd, in: in, report: bufio.NewReader(report), rfile: report}
			a.mu.Lock()
			if a.stopping {
				w.release()
			} else {
				a.keepWarmLocked(w)
			}
			a.mu.Unlock()
		}
	}()
}

// maxShimStarts bounds how often a job that never started is handed to a
// new shim.
const maxShimStarts = 3

// finished records the shim's end, once.
func (a *Agent) finished(j *localJob) { a.finishedBy(j, false) }

// finishedBy records the end of j's job; reported says its shim, alive,
// reported the job done (exit.json written, nothing of the job running).
func (a *Agent) finishedBy(j *localJob, reported bool) {
	if !reported {
		// The shim removes the job's group; one that died could not.
		a.removeGroup(j)
	}
	var ex shimExit
	err := readJSON(filepath.Join(j.dir, fileExit), &ex)
	a.mu.Lock()
	if j.exit == nil && err != nil && neverStarted(j.dir) {
		// The shim ended before it began the job (a warm shim that lost its
		// agent, a shim killed while starting): nothing ran.
		switch {
		case j.stopSent > 0:
			reason := exitStopped
			if j.stopSent == 2 {
				reason = exitAborted
			}
			ex, err = shimExit{Reason: reason, Message: "stopped before it started", FinishedAt: a.now()}, nil
		case j.shimStarts < maxShimStarts && !j.orphan && !a.stopping:
			a.log.Warn("job's shim ended before the job started; starting it again", "job_id", j.id)
			starts := j.shimStarts
			delete(a.jobs, j.id)
			a.startLocked(j.asg)
			if nj, ok := a.jobs[j.id]; ok {
				nj.shimStarts = starts + 1
			}
			a.mu.Unlock()
			return
		}
	}
	if j.exit == nil && err != nil && a.resumeContainerLocked(j) {
		a.mu.Unlock()
		return
	}
	if j.exit == nil {
		if err != nil {
			ex = shimExit{ExitCode: -1, Reason: api.ReasonLostByAgent, Message: "the job's supervisor ended without a status: " + err.Error(), FinishedAt: a.now()}
		}
		j.exit = &ex
	}
	if j.exit.OutputLost > 0 || j.exit.Reason == exitStartFailed || err != nil {
		// Output lost, a job that could not start, a status the shim
		// could not write: all may be a full disk.
		a.checkDiskSoon()
	}
	orphan := j.orphan
	if orphan {
		a.removeLocked(j)
	}
	a.mu.Unlock()
	a.poke()
}

func (a *Agent) removeLocked(j *localJob) {
	a.removeDir(a.forgetLocked(j))
}

// forgetLocked drops j from the agent's jobs and returns its directory, for
// removeDir.
func (a *Agent) forgetLocked(j *localJob) string {
	if j.out != nil {
		j.out.Close()
	}
	delete(a.jobs, j.id)
	a.dropContainerLocked(j) // agent_container.go
	return j.dir
}

func (a *Agent) removeDir(dir string) {
	if dir == "" {
		return
	}
	// With the user's directory of a job that ran as its user (runas.go).
	for _, d := range []string{dir, filepath.Join(a.spool(), filepath.Base(dir))} {
		detachJobDisks(d) // jobdisk.go: what a dead shim left mounted
		if err := os.RemoveAll(d); err != nil {
			a.log.Warn("remove job directory", "dir", d, "err", err)
		}
	}
}

// restore finds the jobs an earlier agent left in the data directory.
func (a *Agent) restore() error {
	root := filepath.Join(a.cfg.DataDir, "jobs")
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for _, e := range ents {
		id, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		var sp shimSpec
		if err := readJSON(filepath.Join(dir, fileSpec), &sp); err != nil {
			// Written atomically before the shim starts: without it the job
			// never started, and the server's sync will assign it again.
			a.log.Warn("dropping unreadable job directory", "dir", dir, "err", err)
			a.removeDir(dir)
			continue
		}
		asg := sp.Assignment
		asg.MaxDuration = currentLimit(dir, asg.MaxDuration) // timelimit.go
		j := &localJob{id: id, dir: dir, asg: asg, cg: sp.Cgroup, startedSent: false}
		a.jobs[id] = j
		var ex shimExit
		if err := readJSON(filepath.Join(dir, fileExit), &ex); err == nil {
			j.exit, j.started = &ex, ex.StartedAt
			a.removeGroup(j) // in case the shim could not
			continue
		}
		pid, err := readPid(filepath.Join(dir, fileShimID))
		if err != nil {
			pid, err = shimIn(dir)
		}
		if err == nil && !shimAlive(pid, dir) && isShim(pid) {
			// A warm shim that was told its job just before the agent
			// died may not have moved into the job's directory yet:
			// give it a moment, or it would be taken for gone and the
			// job started twice.
			settleWarmShim(pid, dir)
		}
		if err == nil && shimAlive(pid, dir) {
			j.shimPid = pid
			j.started = a.now()
			if err := a.watch(j); err == nil {
				continue
			}
		}
		// The shim is gone without leaving a status: what it ran must not
		// outlive it. Check once more for a status written meanwhile; a job
		// that never started is dropped here and started again when the
		// server's sync lists it; else it is lost.
		a.removeGroup(j)
		if err := readJSON(filepath.Join(dir, fileExit), &ex); err == nil {
			j.exit, j.started = &ex, ex.StartedAt
			continue
		}
		if neverStarted(dir) {
			j.rerun = true
			continue
		}
		if a.resumeContainerLocked(j) {
			continue
		}
		j.exit = &shimExit{ExitCode: -1, Reason: api.ReasonLostByAgent, Message: "the job's supervisor is gone", FinishedAt: a.now()}
	}
	return nil
}

// watch waits for a shim that is not the agent's child, through a pidfd.
func (a *Agent) watch(j *localJob) error {
	fd, err := unix.PidfdOpen(j.shimPid, 0)
	if err != nil {
		return err
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		a.finished(j)
	}()
	return nil
}

// neverStarted tells whether the job of dir never began: its shim creates
// the output file before it starts the job.
func neverStarted(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, fileOutput))
	return errors.Is(err, os.ErrNotExist)
}

// shimIn finds the process working in dir: a shim that started but whose
// pid was never recorded (the agent died in between).
func shimIn(dir string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !shimAlive(pid, dir) {
			continue
		}
		// A job's own process may work there too: only a shim's second
		// argument names its role.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if args := strings.Split(string(b), "\x00"); err == nil && len(args) > 1 && strings.HasSuffix(args[1], "shim") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("agent: no process works in %s", dir)
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// shimAlive tells whether pid is still the shim of dir (and not a reused
// pid): a shim works in its job's directory.
// isShim tells whether pid is a `berth shim` process.
func isShim(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(b), "\x00")
	return err == nil && len(args) > 1 && strings.HasSuffix(args[1], "shim")
}

// settleWarmShim waits, up to a few seconds, until shim pid works in dir or
// is gone. A warm shim that got its directory moves there at once; one that
// did not sees its input close with the agent and exits.
func settleWarmShim(pid int, dir string) {
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if shimAlive(pid, dir) || !isShim(pid) {
			return
		}
	}
}

func shimAlive(pid int, dir string) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return cwd == abs
}

// sender ships job events and output to the server, in order, one batch at a
// time; what the server acknowledged is never sent again, and what it did not
// is re-read from the job's files, so a lost batch or a restart loses nothing.
func (a *Agent) sender(ctx context.Context) {
	tick := time.NewTicker(a.cfg.LogTick)
	defer tick.Stop()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-tick.C:
		}
		for ctx.Err() == nil {
			evs, more := a.collect()
			if len(evs) == 0 {
				break
			}
			ack, err := a.c.AgentEvents(ctx, api.AgentEvents{Node: a.cfg.Name, Events: evs})
			if err != nil {
				if ctx.Err() == nil {
					a.log.Warn("report to server failed; retrying", "err", err, "in", backoff)
					select {
					case <-ctx.Done():
					case <-time.After(backoff):
					}
					backoff = min(backoff*2, 2*time.Second)
				}
				continue
			}
			backoff = 50 * time.Millisecond
			a.acked(evs, ack)
			if !more {
				break
			}
		}
	}
}

const batchBytes = 1 << 20

// collect gathers what the server has not acknowledged yet; more says a
// budget cut it short.
func (a *Agent) collect() (evs []api.AgentEvent, more bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]int64, 0, len(a.jobs))
	for id, j := range a.jobs {
		if j.synced && !j.orphan {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, k int) bool { return ids[i] < ids[k] })
	budget := batchBytes
	for _, id := range ids {
		j := a.jobs[id]
		if !j.startedSent && !j.started.IsZero() && (j.exit == nil || !j.exit.StartedAt.IsZero()) {
			at := j.started
			if j.exit != nil {
				at = j.exit.StartedAt // the shim's own record, when it has one
			}
			evs = append(evs, api.AgentEvent{JobID: id, Type: "started", Time: at})
		}
		complete := true
		if j.dir != "" {
			if j.out == nil {
				f, err := os.Open(filepath.Join(j.dir, fileOutput))
				if err == nil {
					j.out = f
				}
			}
			if j.out != nil {
				frames, next, err := ReadFrames(j.out, j.acked, budget)
				if err != nil && !j.torn {
					a.log.Error("read job output", "job_id", id, "err", err)
				}
				for _, f := range frames {
					evs = append(evs, api.AgentEvent{JobID: id, Type: "log", Time: f.Time, Offset: f.Offset, Size: f.Size(), Stream: f.Stream, Data: f.Data})
					budget -= len(f.Data)
				}
				if fi, err := j.out.Stat(); err == nil && next < fi.Size() {
					switch {
					case budget <= 0 || j.exit == nil:
						// More to send, or a frame still being written.
						complete = false
					case !j.torn:
						// The shim is done: what is left is a frame it
						// could not finish (a full disk, its death), the
						// end of the output, not something to wait for.
						j.torn = true
						a.cutTornTail(j, next, fi.Size())
					}
				}
			}
		}
		if budget <= 0 {
			more = true
		}
		if j.exit != nil && complete && !j.exitSent {
			evs = append(evs, api.AgentEvent{JobID: id, Type: "exited", Time: j.exit.FinishedAt, ExitCode: j.exit.ExitCode,
				Signal: j.exit.Signal, Reason: j.exit.Reason, Message: j.exit.Message, NeverStarted: j.exit.StartedAt.IsZero(),
				OOMKilled: j.exit.OOMKilled, MaxRSS: j.exit.MaxRSS})
		}
		if budget <= 0 {
			break
		}
	}
	return evs, more
}

func (a *Agent) acked(evs []api.AgentEvent, ack *api.AgentAck) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range evs {
		j, ok := a.jobs[e.JobID]
		if !ok {
			continue
		}
		switch e.Type {
		case "started":
			j.startedSent = true
		case "exited":
			j.exitSent = true
		}
	}
	for id, size := range ack.LogSize {
		if j, ok := a.jobs[id]; ok {
			j.acked = size
		}
	}
	var gone []string
	for _, id := range ack.Closed {
		if j, ok := a.jobs[id]; ok && j.exit != nil {
			gone = append(gone, a.forgetLocked(j))
		}
	}
	if len(gone) == 0 {
		return
	}
	// The directories go without the lock: removing them costs more than
	// anything else the agent does for a short job, and the next job's
	// start waits for the lock.
	a.mu.Unlock()
	for _, dir := range gone {
		a.removeDir(dir)
	}
	a.mu.Lock()
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}
