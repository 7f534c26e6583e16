package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/agent/container"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// The shim's container mode: a job whose assignment names a Container runs
// as that container, under the same contract as a process job (output.log
// frames, exit.json, the stop note and the agent's signals), so the agent
// and the server treat both alike.
//
// fileContainer records the job's container in its directory: its name
// before it is created, and where its output starts in output.log once it
// started. A shim started later on the same directory (the first one died,
// the container lives on) finds the container by that name and resumes its
// output at the byte where the first one stopped.
const fileContainer = "container.json"

type containerRecord struct {
	Name     string `json:"name"`
	Started  bool   `json:"started"`
	LogStart int64  `json:"log_start"` // offset in output.log where the container's output begins
}

// runContainer supervises the container of sp until it ends, then records
// its exit through finish and removes it.
func runContainer(dir string, sp *shimSpec, fw *frameWriter, ex *shimExit, sigs <-chan os.Signal, finish func() error) error {
	note := func(format string, args ...any) {
		_ = fw.write(2, []byte("berth: "+fmt.Sprintf(format, args...)+"\n"))
	}
	failStart := func(err error) error {
		msg := fmt.Sprintf("cannot start the job's container: %v", err)
		note("%s", msg)
		ex.ExitCode, ex.Reason, ex.Message = 127, exitStartFailed, msg
		return finish()
	}
	stoppedBeforeStart := func(level int) error {
		ex.StartedAt, ex.Reason, ex.Message = time.Time{}, exitStopped, "stopped before it started"
		if level == 2 {
			ex.Reason = exitAborted
		}
		return finish()
	}
	lost := func(format string, args ...any) error {
		ex.ExitCode, ex.Reason, ex.Message = -1, api.ReasonLostByAgent, fmt.Sprintf(format, args...)
		return finish()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	eng, err := container.Open(octx)
	ocancel()
	if err != nil {
		return failStart(fmt.Errorf("this node has no container engine: %w", err))
	}
	defer eng.Close()

	recPath := filepath.Join(dir, fileContainer)
	var rec containerRecord
	var c *container.Container
	if readJSON(recPath, &rec) == nil {
		c, err = eng.Get(ctx, rec.Name)
		switch {
		case errors.Is(err, container.ErrNotFound) && rec.Started:
			return lost("the job's container %s is gone", rec.Name)
		case errors.Is(err, container.ErrNotFound):
			c = nil // the shim before this one died before creating it
		case err != nil:
			return lost("the job's container %s: %v", rec.Name, err)
		}
	}
	level := stopRequested(dir)
	if c == nil {
		if level > 0 {
			return stoppedBeforeStart(level)
		}
		var carried []container.Mount
		workdir := ""
		if carriesInContainer(sp) { // carry_container.go: repos, files, disk
			var unmount func()
			if carried, workdir, unmount, err = carryIntoContainer(dir, sp, func(m string) { note("%s", m) }); err != nil {
				return failStart(err)
			}
			defer unmount() // after the container is removed (deferred below)
		}
		cs, err := containerSpec(dir, sp)
		if err != nil {
			return failStart(err)
		}
		cs.Mounts = append(cs.Mounts, carried...)
		if workdir != "" {
			cs.WorkingDir = workdir
		}
		// The name goes on record first: a shim that dies while the engine
		// creates the container leaves its successor a way to find it.
		rec = containerRecord{Name: cs.Name}
		if err := writeJSONAtomic(recPath, rec); err != nil {
			return err
		}
		if c, err = eng.Create(ctx, cs, streamWriter{w: fw, stream: 2}); err != nil {
			return failStart(err)
		}
	}
	// Whatever happens from here on, the container goes once its end is on
	// record (a crash in between leaves it for the next shim to find).
	defer func() { _ = c.Remove(context.Background()) }()

	st, err := c.Inspect(ctx)
	if err != nil {
		return lost("the job's container %s: %v", rec.Name, err)
	}
	var skip int64
	if !st.Started() {
		if level > 0 {
			return stoppedBeforeStart(level)
		}
		if err := c.Start(ctx); err != nil {
			return failStart(err)
		}
		ex.StartedAt = time.Now().UTC()
		if st, err := c.Inspect(ctx); err == nil {
			notePorts(note, st.Ports)
		}
		rec.Started, rec.LogStart = true, logEnd(fw)
		if err := writeJSONAtomic(recPath, rec); err != nil {
			return err
		}
	} else {
		// A shim before this one started it: go on from where it stopped.
		ex.StartedAt = st.StartedAt
		if skip, err = resumeLog(fw, &rec); err != nil {
			return lost("resume the output of %s: %v", rec.Name, err)
		}
		if err := writeJSONAtomic(recPath, rec); err != nil {
			return err
		}
	}

	// Its SSH endpoint (shim_ssh.go), for as long as it runs.
	sshIdle, stopSSH := serveContainerSSH(ctx, dir, c, sp.Assignment.Container, note)
	defer stopSSH()
	idleEnded := false

	logsDone := make(chan struct{})
	logCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	go func() {
		defer close(logsDone)
		copyLogs(logCtx, c, fw, skip)
	}()
	type waited struct {
		st   container.State
		gone bool // removed behind our back
	}
	exited := make(chan waited, 1)
	go func() {
		for backoff := 100 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
			st, err := c.Wait(ctx)
			if err == nil || errors.Is(err, container.ErrNotFound) {
				exited <- waited{st, err != nil}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}()

	// The limit counts from the container's start, which a new shim finds
	// in the record; the limit may have moved since job.json (timelimit.go).
	asg := sp.Assignment
	asg.MaxDuration = currentLimit(dir, sp.MaxDuration)
	clock := newJobClock(ex.StartedAt, asg)
	defer clock.stop()
	grace := time.Duration(max(sp.Grace, 0)) * time.Second
	stopping := false
	terminate := func(reason string) {
		if ex.Reason == "" {
			ex.Reason = reason
		}
		if !stopping {
			stopping = true
			go func() {
				if err := c.Stop(ctx, grace); err != nil {
					note("%v", err)
				}
			}()
		}
	}
	abort := func() {
		ex.Reason = exitAborted
		go func() {
			if err := c.Kill(ctx); err != nil {
				note("%v", err)
			}
		}()
	}
	// A stop asked for while no shim watched the container.
	switch level {
	case 1:
		terminate(exitStopped)
	case 2:
		abort()
	}
	for done := false; !done; {
		select {
		case w := <-exited:
			if w.gone {
				stopLogs()
				<-logsDone
				return lost("the job's container %s was removed by someone else", rec.Name)
			}
			st, done = w.st, true
		case s := <-sigs:
			switch s {
			case sigStop:
				terminate(exitStopped)
			case sigAbort:
				abort()
			case sigForward: // a signal to pass on, or a new time limit
				clock.setLimit(currentLimit(dir, sp.MaxDuration))
				if sig, _, _, ok := forwardedSignal(dir); ok && !stopping {
					go func() {
						if err := c.Signal(ctx, strconv.Itoa(int(sig))); err != nil {
							note("%v", err)
						}
					}()
				}
			}
		case <-sshIdle: // a dev environment nobody used for its inactivity_duration
			sshIdle = nil
			if !stopping {
				idleEnded = true
				terminate("")
			}
		case <-clock.deadlineC():
			clock.deadlinePassed()
			terminate(exitMaxDuration)
		case <-clock.warnC():
			clock.warnSent()
			if !stopping {
				go func() {
					if err := c.Signal(ctx, strconv.Itoa(sp.Assignment.Signal.Number)); err != nil {
						note("%v", err)
					}
				}()
			}
		}
	}
	select {
	case <-logsDone:
	case <-time.After(5 * time.Second):
		stopLogs()
		<-logsDone
	}

	if idleEnded && ex.Reason == "" {
		st.ExitCode = 0 // it ended as its inactivity_duration says: done
	}
	ex.ExitCode = st.ExitCode
	if st.ExitCode == 137 && !st.OOMKilled && ex.Reason == "" && sp.Assignment.Alloc.Memory > 0 {
		// The engine learns of an OOM kill from an event that may land
		// after the exit: look again for a moment before calling it a
		// plain SIGKILL.
		for i := 0; i < 10 && !st.OOMKilled; i++ {
			time.Sleep(100 * time.Millisecond)
			if again, err := c.Inspect(ctx); err == nil {
				st.OOMKilled = again.OOMKilled
			}
		}
	}
	switch {
	case st.OOMKilled && st.ExitCode != 0 && ex.Reason == "":
		ex.Reason, ex.Signal = api.ReasonOOM, "SIGKILL"
		ex.Message = "the job ran out of memory"
		if m := sp.Assignment.Alloc.Memory; m > 0 {
			ex.Message += " (it holds " + spec.Bytes(m).Approx() + ")"
		}
		note("%s", ex.Message)
	case ex.Reason != "" && st.ExitCode > 128 && st.ExitCode <= 128+64:
		// The engine gives only a code; after our own stop, 137 and 143
		// are SIGKILL and SIGTERM.
		ex.Signal = unix.SignalName(syscall.Signal(st.ExitCode - 128))
	}
	if ex.Message == "" && st.Error != "" {
		ex.Message = st.Error
	}
	return finish()
}

// copyLogs streams the container's output into the job's log from offset
// skip until the container stops, resuming when the engine's stream breaks
// while it still runs.
func copyLogs(ctx context.Context, c *container.Container, fw *frameWriter, skip int64) {
	for {
		var err error
		skip, err = c.Logs(ctx, skip, streamWriter{w: fw, stream: 1}, streamWriter{w: fw, stream: 2})
		if ctx.Err() != nil {
			return
		}
		st, ierr := c.Inspect(ctx)
		if ierr != nil || !st.Running {
			return
		}
		_ = err // the container runs on: read again from where the stream broke
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logEnd is the current end of the job's log.
func logEnd(fw *frameWriter) int64 {
	fi, err := fw.f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

// resumeLog readies the log for a shim that takes over a running container:
// it returns how many bytes of the container's output the log already
// holds.
func resumeLog(fw *frameWriter, rec *containerRecord) (int64, error) {
	if !rec.Started {
		// The previous shim died between starting the container and
		// recording it: it had copied none of its output.
		rec.Started, rec.LogStart = true, logEnd(fw)
		return 0, nil
	}
	r, err := os.Open(fw.f.Name())
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var held int64
	off := int64(0)
	for {
		frames, next, err := ReadFrames(r, off, 1<<20)
		if err != nil {
			return 0, err
		}
		for _, f := range frames {
			if f.Offset >= rec.LogStart {
				held += int64(len(f.Data))
			}
		}
		if len(frames) == 0 {
			break
		}
		off = next
	}
	// A frame the previous shim left half-written is gone already:
	// openFrames cut it off.
	return held, nil
}

func notePorts(note func(string, ...any), ports map[int][]string) {
	keys := make([]int, 0, len(ports))
	for p := range ports {
		keys = append(keys, p)
	}
	sort.Ints(keys)
	for _, p := range keys {
		note("port %d is published at %s", p, strings.Join(ports[p], ", "))
	}
}

// containerSpec is the container the job asks for: its image, its commands
// run by the image's shell as one script (written into the job's directory
// and mounted at containerScript), its environment (the server's
// variables and the run's env, nothing of the host's), its allocation as
// limits, and Berth's labels.
func containerSpec(dir string, sp *shimSpec) (container.Spec, error) {
	asg := sp.Assignment
	ct := asg.Container
	node := envValue(asg.Env, "BERTH_NODE_NAME")
	if node == "" {
		node, _ = os.Hostname()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return container.Spec{}, err
	}
	s := container.Spec{
		Name: container.NewName(node, asg.JobID),
		Labels: map[string]string{
			container.LabelManaged: "1", container.LabelNode: node, container.LabelDir: abs,
			container.LabelJob: strconv.FormatInt(asg.JobID, 10), container.LabelRun: strconv.FormatInt(asg.RunID, 10),
			container.LabelAttempt: strconv.Itoa(asg.Attempt),
		},
		Image: ct.Image, Env: append(containerHostfileEnv(asg), asg.Env...), WorkingDir: asg.WorkingDir, User: ct.User, Privileged: ct.Privileged,
		ShmSize: ct.ShmSize, Memory: asg.Alloc.Memory, NanoCPUs: int64(asg.Alloc.CPUs) * 1e9, HostNetwork: ct.HostNetwork,
	}
	if c := sp.Cred; c != nil {
		// The job's user, not the image's (runas.go): `user:` and
		// `privileged:` would make them whoever they chose, root on the
		// host's files among them.
		if ct.Privileged {
			return container.Spec{}, fmt.Errorf("a privileged container runs only for a job that runs as root, not as %s", c.Login)
		}
		s.User = fmt.Sprintf("%d:%d", c.UID, c.GID)
		for _, g := range c.Groups {
			s.GroupAdd = append(s.GroupAdd, strconv.FormatUint(uint64(g), 10))
		}
	}
	if ra := ct.RegistryAuth; ra != nil {
		s.Auth = &container.Auth{Username: ra.Username, Password: ra.Password}
	}
	if len(asg.Commands) > 0 {
		// The commands reach the shell as a file, not as one argument,
		// which Linux caps at 128 KiB. Readable by the container's user,
		// whoever it is: the job's directory keeps others out.
		path := filepath.Join(abs, fileScript)
		if err := os.WriteFile(path, []byte(script(asg.Commands)), 0o644); err != nil {
			return container.Spec{}, fmt.Errorf("write its script: %w", err)
		}
		s.Entrypoint, s.Cmd = []string{shellPath(ct.Shell)}, []string{containerScript}
		s.Mounts = append(s.Mounts, container.Mount{Source: path, Target: containerScript, ReadOnly: true})
	}
	for _, g := range asg.Alloc.GPUs {
		s.GPUs = append(s.GPUs, strconv.Itoa(g))
	}
	for _, v := range ct.Volumes {
		if v.EngineVolume != "" { // a network volume of this engine (server/volumes.go)
			s.Mounts = append(s.Mounts, container.Mount{Volume: v.EngineVolume, Target: v.Path, ReadOnly: v.ReadOnly})
			continue
		}
		if v.InstancePath == "" {
			return container.Spec{}, fmt.Errorf("volume %q: network volumes are not supported; mount a host directory (/host/dir:%s)", v.Name, v.Path)
		}
		s.Mounts = append(s.Mounts, container.Mount{Source: v.InstancePath, Target: v.Path, ReadOnly: v.ReadOnly, Optional: v.Optional})
	}
	if asg.Hostfile != "" { // dist.go
		s.Mounts = append(s.Mounts, container.Mount{Source: filepath.Join(abs, fileHostfile), Target: containerHostfile, ReadOnly: true})
	}
	for _, p := range ct.Ports {
		s.Ports = append(s.Ports, container.Port{Container: p.ContainerPort, Host: p.LocalPort})
	}
	return s, nil
}

// containerScript is where a container job's shell finds its commands.
const containerScript = "/berth/script"

// shellPath is dstack's reading of `shell:`: a name is under /bin; empty is
// /bin/sh, which every image has.
func shellPath(shell string) string {
	switch {
	case shell == "":
		return "/bin/sh"
	case strings.HasPrefix(shell, "/"):
		return shell
	}
	return "/bin/" + shell
}

func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}
