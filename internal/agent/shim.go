package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/cgroup"
	"github.com/berth-hq/berth/internal/api"
)

// The shim is a job's own small supervisor, as slurmstepd is to slurmd: the
// agent starts one per job (`berth shim DIR`) in a session of its own. The shim
// owns the job's output file and waits for the job, so the job neither dies of
// SIGPIPE nor loses its exit status when the agent or the server hosting it
// dies; a restarted agent finds the shim again through DIR.
//
// Files in DIR: job.json (what to run and the assignment, written by the
// agent before the shim starts), shim.pid, script (the commands, which
// bash reads from there: as one argument, Linux refuses a script over
// 128 KiB), output.log (frames, see logfile.go), exit.json (written last,
// atomically, into room reserved at the start: see reserveExit).
const (
	fileSpec   = "job.json"
	fileShimID = "shim.pid"
	fileScript = "script"
	fileOutput = "output.log"
	fileExit   = "exit.json"
)

// Signals the agent sends the shim.
const (
	sigStop  = syscall.SIGTERM // stop gracefully: SIGTERM to the job, SIGKILL after the grace period
	sigAbort = syscall.SIGUSR2 // stop at once: SIGKILL to the job
	// sigForward: send the job the signal named in its directory's
	// "signal" file (scancel --signal), leaving it running, and read its
	// time limit again (timelimit.go).
	sigForward = syscall.SIGUSR1
)

// warmArg in place of a directory starts a warm shim (see runShim); reuseArg
// a warm shim that reports each job's end on fd 3 and then takes another.
const (
	warmArg  = "-"
	reuseArg = "+"
)

// reportFD is the pipe on which a reusable shim names each job directory it
// is done with (exit.json written, nothing of the job left running).
const reportFD = 3

// Shim exit reasons (exit.json).
const (
	exitStopped     = "stopped"
	exitAborted     = "aborted"
	exitMaxDuration = "max_duration"
	exitStartFailed = "start_failed"
)

type shimSpec struct {
	Script      string   `json:"script"`
	Env         []string `json:"env"`
	Dir         string   `json:"dir"`
	MaxDuration int64    `json:"max_duration"` // seconds, 0 none
	Grace       int64    `json:"grace"`        // seconds
	// SplitStderr keeps stderr a stream of its own. By default both go
	// through one pipe, as Slurm writes both to one file: then their order
	// is exactly the order of the job's writes, which two pipes cannot keep.
	SplitStderr bool `json:"split_stderr,omitempty"`
	// Assignment is the server's word on the job, for a restarted agent.
	Assignment api.Assignment `json:"assignment"`
	// Cgroup is the job's control group, made by the shim before the job
	// starts and removed when it ends; nil: the job runs without one.
	Cgroup *cgroup.Spec `json:"cgroup,omitempty"`
	// Cred, when set, is the user the job runs as (runas.go), and UserDir
	// the directory of theirs where the agent wrote the job's script.
	Cred    *jobCred `json:"cred,omitempty"`
	UserDir string   `json:"user_dir,omitempty"`
	// Shell runs the script (the run's `shell:`); empty: bash.
	Shell string `json:"shell,omitempty"`
	// Server is where the shim fetches the job's archives (archives.go).
	Server string `json:"server,omitempty"`
}

type shimExit struct {
	ExitCode   int       `json:"exit_code"`
	Signal     string    `json:"signal,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// OOMKilled: the kernel killed a process of the job for exceeding its
	// memory (counted in the job's cgroup).
	OOMKilled bool `json:"oom_killed,omitempty"`
	// MaxRSS is the most memory the job's group held at once (bytes; 0:
	// unknown, as without a group).
	MaxRSS int64 `json:"max_rss,omitempty"`
	// OutputLost counts the bytes of the job's output that could not be
	// written (a full disk): the output says where, when it could.
	OutputLost int64 `json:"output_lost,omitempty"`
}

// RunShim supervises the job described in dir/job.json and returns the shim's
// own exit status (0 unless the shim itself could not work).
func RunShim(dir string) int {
	if d, ok := strings.CutPrefix(dir, nsArgPrefix); ok {
		return runMountNS(d) // mountns.go: the job's own mount namespace
	}
	if err := runShim(dir); err != nil {
		fmt.Fprintf(os.Stderr, "berth shim: %v\n", err)
		return 1
	}
	return 0
}

func runShim(arg string) error {
	// Catch stop requests before anything else: one that comes while the
	// shim is still getting ready must neither kill it (SIGTERM's default)
	// nor be lost (SIGUSR2 is ignored until asked for).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, sigStop, sigAbort, sigForward, syscall.SIGINT, syscall.SIGHUP)
	if arg != warmArg && arg != reuseArg {
		cleanup, _, err := superviseJob(arg, sigs, true)
		cleanup()
		return err
	}
	// A warm shim: started ahead of need, it waits for the agent to name
	// its job directory on stdin. EOF (the agent went away) ends it. A
	// reusable one then says on reportFD that the job is done and waits
	// for the next: starting the binary is most of a trivial job's cost.
	in := bufio.NewReader(os.Stdin)
	var report *os.File
	if arg == reuseArg {
		// Inherited without close-on-exec: the job must not get it.
		syscall.CloseOnExec(reportFD)
		report = os.NewFile(reportFD, "report")
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return nil
		}
		// Signals still queued are this job's: the agent hands another job
		// only to a shim it never signalled.
		dir := strings.TrimSpace(line)
		cleanup, again, err := superviseJob(dir, sigs, false)
		if err != nil || report == nil || !again {
			cleanup()
			return err
		}
		// The job's status is written and nothing of it runs: the agent may
		// report its end now; removing its group is this shim's
		// bookkeeping, done before it takes another job. An idle shim does
		// not live in the directory of a job it is done with: a restarted
		// agent would take it for that job's supervisor (shimAlive).
		if err := os.Chdir("/"); err != nil {
			cleanup()
			return err
		}
		_, werr := report.WriteString(dir + "\n")
		cleanup()
		if werr != nil {
			return nil
		}
	}
}

// superviseJob runs the job of dir to its end and writes its exit.json;
// cleanup, which the caller runs once the end is reported, removes the
// job's control group. again says whether the shim may take another job
// (not after a container job: the engine's connection and state were that
// job's).
//
// recordPid writes the shim's pid into dir; a warm shim's is there already
// (the agent writes it before it names the directory).
func superviseJob(dir string, sigs chan os.Signal, recordPid bool) (cleanup func(), again bool, err error) {
	cleanup = func() {}
	// bash runs the script from the job's directory, named absolutely:
	// the job works elsewhere.
	scriptPath, err := filepath.Abs(filepath.Join(dir, fileScript))
	if err != nil {
		return cleanup, true, err
	}
	stepsDir, err := filepath.Abs(filepath.Join(dir, StepsDirName)) // steps.go
	if err != nil {
		return cleanup, true, err
	}
	// The shim lives in its job's directory: a restarted agent recognises
	// it by that (see shimAlive), whatever its command line.
	if err := os.Chdir(dir); err != nil {
		return cleanup, true, err
	}
	var sp shimSpec
	if err := readJSON(filepath.Join(dir, fileSpec), &sp); err != nil {
		return cleanup, true, err
	}
	if recordPid {
		if err := writeFileAtomic(filepath.Join(dir, fileShimID), []byte(strconv.Itoa(os.Getpid()))); err != nil {
			return cleanup, true, err
		}
	}
	// The job's status must be written whatever the disk: its room is
	// taken now (nil: no room, it is written the usual way).
	exitRoom := reserveExit(filepath.Join(dir, fileExit))
	defer exitRoom.release()
	// output.log exists once the shim may start the job: without it, a
	// restarted agent knows the job never ran and may start it again.
	fw, err := openFrames(filepath.Join(dir, fileOutput), time.Now)
	if err != nil {
		return cleanup, true, fmt.Errorf("open output: %w", err)
	}
	defer fw.f.Close()

	started := time.Now() // with its monotonic reading, for the time limit
	ex := shimExit{StartedAt: started.UTC()}
	finish := func() error {
		// Output lost at the end, with no later write to say so, is
		// said in the status.
		if unsaid, err := fw.flush(); unsaid > 0 && ex.Message == "" {
			ex.Message = fmt.Sprintf("%d bytes of output lost: %v", unsaid, err)
		}
		ex.OutputLost = fw.dropped()
		ex.FinishedAt = time.Now().UTC()
		b, _ := json.Marshal(ex)
		return exitRoom.write(filepath.Join(dir, fileExit), b)
	}
	if sp.Assignment.Container != nil {
		// A container job's shim is not reused (the agent sees it exit).
		return cleanup, false, runContainer(dir, &sp, fw, &ex, sigs, finish) // shim_container.go
	}
	// A stop asked for before the job started (the agent leaves a note, in
	// case its signal came before the shim could catch it): never start it.
	if level := stopRequested(dir); level > 0 {
		ex.StartedAt = time.Time{}
		ex.Reason = exitStopped
		if level == 2 {
			ex.Reason = exitAborted
		}
		ex.Message = "stopped before it started"
		return cleanup, true, finish()
	}

	readers := map[byte]*os.File{}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return cleanup, true, err
	}
	readers[1] = stdoutR
	stderrW := stdoutW
	if sp.SplitStderr {
		var stderrR *os.File
		if stderrR, stderrW, err = os.Pipe(); err != nil {
			return cleanup, true, err
		}
		readers[2] = stderrR
	}
	closeWriters := func() {
		stdoutW.Close()
		stderrW.Close()
	}
	scriptPath = filepath.Join(filepath.Dir(scriptPath), scriptFile(sp.Assignment))
	if sp.UserDir != "" {
		scriptPath = filepath.Join(sp.UserDir, scriptFile(sp.Assignment)) // written by the agent
		stepsDir = filepath.Join(sp.UserDir, StepsDirName)
	}
	cmd := bashCommand(scriptPath)
	if sp.Shell != "" && sp.Shell != "bash" {
		cmd = exec.Command(shellPath(sp.Shell), scriptPath)
	}
	batch := sp.Assignment.Batch
	if !isBatch(sp.Assignment) {
		batch = nil
	}
	if batch != nil {
		cmd = batchCommand(batch, sp.Script, scriptPath) // batch.go
	}
	cmd.Env = sp.Env
	cmd.Dir = sp.Dir
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c := sp.Cred; c != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: c.Groups}
	}
	err = checkWorkDir(sp.Dir)
	if err == nil && sp.UserDir == "" {
		err = os.WriteFile(scriptPath, []byte(sp.Script), 0o600)
	}
	if err == nil {
		var unmount func()
		var note string
		unmount, note, err = mountJobDisk(dir, &sp) // jobdisk.go
		defer unmount()
		if note != "" {
			_ = fw.write(2, []byte(fmt.Sprintf("berth: resources.disk is not enforced: %s\n", note)))
		}
	}
	if err == nil {
		err = cloneRepos(&sp, hostDest(&sp), func(m string) { _ = fw.write(2, []byte("berth: "+m+"\n")) }) // clones.go: repos by URL
	}
	if err == nil {
		err = carryArchives(&sp, hostDest(&sp)) // archives.go: the run's repo and files
	}
	var stdio []*os.File
	if err == nil && batch != nil {
		// As slurmd: the script's files, opened as its user (batch.go).
		var bashEnv string
		if bashEnv, err = loginEnv(batch, sp.Script, scriptPath, cmd.Env, sp.Cred); err == nil && bashEnv != "" {
			cmd.Env = append(cmd.Env, bashEnv)
		}
		if err == nil {
			stdio, err = batchStdio(batch, sp.Cred)
		}
		if err == nil {
			cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
		}
	}
	if err == nil && needsMountNS(&sp) {
		err = wrapInMountNS(cmd, dir, &sp, func(msg string) { _ = fw.write(2, []byte(msg)) }) // mountns.go: volumes, /dev/shm
	}
	var grp *cgroup.Group
	if err == nil {
		grp, err = startJob(cmd, sp.Cgroup)
	}
	closeFiles(stdio) // the job holds them now, or never will
	if err != nil {
		closeWriters()
		msg := fmt.Sprintf("berth: cannot start the job: %v\n", err)
		if strings.HasPrefix(err.Error(), "slurmstepd: ") {
			msg = err.Error() + "\n" // a batch script's file: slurmstepd's words
		}
		_ = fw.write(2, []byte(msg))
		ex.ExitCode, ex.Reason, ex.Message = 127, exitStartFailed, msg
		return cleanup, true, finish()
	}
	closeWriters()
	pgid := cmd.Process.Pid
	// signalJob reaches every process of the job: those in its cgroup
	// (where a daemon that left the process group still is), else those of
	// its process group and of its steps' tasks (steps.go).
	signalJob := func(sig unix.Signal) {
		if grp == nil || grp.Signal(sig) != nil {
			_ = unix.Kill(-pgid, sig)
			signalSteps(stepsDir, pgid, sig)
		}
	}

	var copiers sync.WaitGroup
	for stream, r := range readers {
		copiers.Add(1)
		go func() {
			defer copiers.Done()
			_, _ = io.Copy(streamWriter{w: fw, stream: stream}, r)
		}()
	}

	exited := make(chan *os.ProcessState, 1)
	go func() {
		st, _ := cmd.Process.Wait()
		exited <- st
	}()
	// The job's SSH endpoint, once it has lived a while (shim_native_ssh.go).
	sshSoon := time.NewTimer(nativeSSHDelay)
	stopSSH := func() {}

	// The limit counts from the job's start; scontrol update may move it
	// (timelimit.go), even before this shim started the job.
	asg := sp.Assignment
	asg.MaxDuration = currentLimit(dir, sp.MaxDuration)
	clock := newJobClock(started, asg)
	defer clock.stop()
	var killAfter <-chan time.Time
	var warnAgain <-chan time.Time // S: found no step yet (steps.go)
	grace := time.Duration(max(sp.Grace, 0)) * time.Second
	terminate := func(reason string) {
		if ex.Reason == "" {
			ex.Reason = reason
		}
		signalJob(unix.SIGTERM)
		if killAfter == nil {
			killAfter = time.After(grace)
		}
	}
	var st *os.ProcessState
	for st == nil {
		select {
		case st = <-exited:
		case s := <-sigs:
			switch s {
			case sigStop:
				terminate(exitStopped)
			case sigAbort:
				ex.Reason = exitAborted
				signalJob(unix.SIGKILL)
			case sigForward: // a signal to pass on, or a new time limit
				clock.setLimit(currentLimit(dir, sp.MaxDuration))
				switch sig, batchOnly, stepsOnly, ok := forwardedSignal(dir); {
				case ok && batchOnly:
					_ = unix.Kill(pgid, sig)
				case ok && stepsOnly:
					signalSteps(stepsDir, pgid, sig) // none running: none gets it, as in Slurm
				case ok:
					signalJob(sig)
				}
			}
		case <-clock.deadlineC():
			clock.deadlinePassed()
			terminate(exitMaxDuration)
		case <-clock.warnC():
			clock.warnSent()
			if ex.Reason == "" && !warnJob(sp.Assignment.Signal, pgid, stepsDir, signalJob) {
				warnAgain = time.After(time.Second)
			}
		case <-warnAgain:
			warnAgain = nil
			if ex.Reason == "" && !warnJob(sp.Assignment.Signal, pgid, stepsDir, signalJob) {
				warnAgain = time.After(time.Second)
			}
		case <-killAfter:
			signalJob(unix.SIGKILL)
		case <-sshSoon.C:
			stopSSH = serveNativeSSH(dir, &sp, grp, func(f string, a ...any) { _ = fw.write(2, []byte("berth: "+fmt.Sprintf(f, a...)+"\n")) })
		}
	}
	sshSoon.Stop()
	stopSSH() // its sessions end with the job
	// Whatever the job left behind in its process group or its steps' ends
	// with it, and so does whatever left the group but not the job's cgroup.
	_ = unix.Kill(-pgid, unix.SIGKILL)
	signalSteps(stepsDir, pgid, unix.SIGKILL)
	var oomKills uint64
	if grp != nil {
		oomKills = endGroup(grp)
		if peak, ok := sp.Cgroup.Peak(); ok {
			ex.MaxRSS = peak
		}
	}
	done := make(chan struct{})
	go func() { copiers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		// A process that left the group still holds the pipes: stop reading.
		for _, r := range readers {
			r.Close()
		}
		<-done
	}
	for _, r := range readers {
		r.Close() // a reused shim runs many jobs
	}
	if oomKills > 0 {
		// Said after the job's last words, as slurmstepd does.
		ex.OOMKilled = true
		_ = fw.write(2, []byte(fmt.Sprintf("berth: the job exceeded its memory (%s): the kernel killed %d of its processes (OOM)\n",
			memoryText(sp.Cgroup.Memory), oomKills)))
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ex.ExitCode = 128 + int(ws.Signal())
		ex.Signal = unix.SignalName(ws.Signal())
	} else {
		ex.ExitCode = st.ExitCode()
	}
	if grp != nil {
		// After the status is out: removing the group is bookkeeping, and
		// the job's end (what frees its node) need not wait for it.
		cleanup = func() {
			if derr := grp.Delete(); derr != nil {
				fmt.Fprintf(os.Stderr, "berth shim: %v\n", derr)
			}
		}
	}
	return cleanup, true, finish()
}

// lookBash finds bash once per shim: a reused shim starts many jobs.
var lookBash = sync.OnceValues(func() (string, error) { return exec.LookPath("bash") })

// bashCommand is `bash FILE`, bash looked up in the shim's PATH.
func bashCommand(file string) *exec.Cmd {
	path, err := lookBash()
	if err != nil {
		return exec.Command("bash", file) // it says why it cannot start
	}
	return &exec.Cmd{Path: path, Args: []string{"bash", file}}
}

// checkWorkDir says why the job cannot work in dir, naming it: the
// kernel's answer to a chdir that fails comes back as the failure to
// execute bash ("fork/exec /usr/bin/bash: no such file or directory").
func checkWorkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("its working directory %s (working_dir) does not exist on this node", dir)
	case err != nil:
		return fmt.Errorf("its working directory %s (working_dir): %w", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("its working directory %s (working_dir) is not a directory", dir)
	}
	if err := unix.Access(dir, unix.X_OK); err != nil {
		return fmt.Errorf("its working directory %s (working_dir): %w", dir, err)
	}
	return nil
}

// exitRoomSize is the room reserved for exit.json: a page, several times
// what a status takes.
const exitRoomSize = 4096

// exitRoom is exit.json's temporary file, holding exitRoomSize bytes taken
// before the job starts, so that its status can be written when the job
// has filled the disk: rewriting bytes a file holds needs no more room.
type exitRoom struct{ f *os.File }

// reserveExit takes the room for the status that goes to path; nil when
// there is none (then it is written the usual way, if it can be).
func reserveExit(path string) *exitRoom {
	f, err := os.OpenFile(path+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil
	}
	if _, err := f.Write(make([]byte, exitRoomSize)); err != nil {
		f.Close()
		_ = os.Remove(f.Name())
		return nil
	}
	return &exitRoom{f}
}

// write puts data at path atomically, in the room when it fits.
func (r *exitRoom) write(path string, data []byte) error {
	if r == nil || r.f == nil || len(data) > exitRoomSize {
		r.release()
		return writeFileAtomic(path, data)
	}
	f := r.f
	r.f = nil
	_, err := f.WriteAt(data, 0)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// release gives the room back if it was not used.
func (r *exitRoom) release() {
	if r != nil && r.f != nil {
		r.f.Close()
		_ = os.Remove(r.f.Name())
		r.f = nil
	}
}

// fileStop holds "1" (stop) or "2" (abort) once the agent asked the job to
// end; the signal that goes with it may reach a shim too early to count.
const fileStop = "stop"

func stopRequested(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, fileStop))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeFileAtomic replaces path with data so that readers see the old file or
// the new one, never a part.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}

// startJob starts cmd, inside a new control group when spec asks for one.
func startJob(cmd *exec.Cmd, spec *cgroup.Spec) (*cgroup.Group, error) {
	if spec == nil {
		return nil, cmd.Start()
	}
	// A group of the same name left by an earlier shim of this job that
	// died is emptied by the agent before it starts this one (finished,
	// restore); Create reuses what is left.
	grp, err := cgroup.StartIn(*spec, cmd)
	if ce := (*cgroup.CreateError)(nil); errors.As(err, &ce) {
		return nil, fmt.Errorf("cannot confine it: %w", ce.Err)
	}
	return grp, err
}

// endGroup kills what is left of the job in its group and returns how many
// of the job's processes the kernel killed for want of memory (the group is
// removed once the job's status is written). Errors go to the shims' log:
// the job has ended either way.
func endGroup(grp *cgroup.Group) (oomKills uint64) {
	if err := grp.Kill(10 * time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "berth shim: %v\n", err)
	}
	// Read after the kill: a process of the job OOM-killed at the end
	// counts too.
	n, err := grp.OOMKills()
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth shim: %v\n", err)
	}
	return n
}

// memoryText writes a limit in the units of a configuration's memory.
func memoryText(b int64) string {
	switch {
	case b <= 0:
		return "no limit"
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dGB", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dMB", b>>20)
	}
	return fmt.Sprintf("%d bytes", b)
}

// fileSignal holds the signal the agent asks a shim to forward to its job:
// "N" (every process of the job), "B:N" (its main process only) or "S:N"
// (the tasks of its steps only).
const fileSignal = "signal"

// forwardedSignal reads fileSignal and removes it: the same sigForward
// also says that the time limit changed (timelimit.go), which must not send
// the job an earlier signal again.
func forwardedSignal(dir string) (sig unix.Signal, batchOnly, stepsOnly, ok bool) {
	path := filepath.Join(dir, fileSignal)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, false, false
	}
	_ = os.Remove(path)
	text := strings.TrimSpace(string(b))
	text, batchOnly = strings.CutPrefix(text, "B:")
	text, stepsOnly = strings.CutPrefix(text, "S:")
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 || n > 64 {
		return 0, false, false, false
	}
	return unix.Signal(n), batchOnly, stepsOnly, true
}
