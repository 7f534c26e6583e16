package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Spec is one job's group: where it is and what it limits. The agent writes
// it into the job's directory, so that the shim and a restarted agent find
// the same group.
type Spec struct {
	Version int `json:"version"`
	// Root: v1, the directory where each controller is mounted as
	// Root/<controller>; v2, the unified mount.
	Root string `json:"root"`
	// Paths is the group inside each hierarchy: v1, one per controller;
	// v2, one under the key "".
	Paths  map[string]string `json:"paths"`
	Memory int64             `json:"memory,omitempty"` // bytes; 0: not limited
	// Swap limits memory+swap to Memory as well (v1 memsw; v2 no swap at
	// all), so that a job over its memory is OOM-killed, not swapped out.
	Swap bool `json:"swap,omitempty"`
	CPUs int  `json:"cpus,omitempty"` // CFS quota of CPUs × period; 0: not limited
	// Owner is the UID the job runs as (0: root, or the caller's). On v1
	// the job's bash moves itself into the group, as that user: each
	// hierarchy's `tasks` is made theirs (as systemd delegates a group),
	// nothing else of the group. On v2 the caller moves it.
	Owner uint32 `json:"owner,omitempty"`
}

// cfsPeriod is the CFS period the quota is a multiple of: the kernel's
// default, 100ms.
const cfsPeriod = 100000

// Dirs are the group's directories, one per hierarchy.
func (s Spec) Dirs() []string {
	var out []string
	for _, c := range s.keys() {
		out = append(out, s.dir(c))
	}
	return out
}

func (s Spec) keys() []string {
	keys := make([]string, 0, len(s.Paths))
	for c := range s.Paths {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	return keys
}

// dir is the group's directory in hierarchy c (v1 controller; "" on v2).
func (s Spec) dir(c string) string {
	if s.Version == 1 {
		return filepath.Join(s.Root, c, s.Paths[c])
	}
	return filepath.Join(s.Root, s.Paths[""])
}

// Group is a job's control group, made or found.
type Group struct {
	spec Spec
	v1   cgroup1.Cgroup
	v2   *cgroup2.Manager
}

// Create makes the group with its limits. Nothing of it is left when it
// fails.
func Create(s Spec) (*Group, error) {
	g := &Group{spec: s}
	var err error
	switch s.Version {
	case 1:
		g.v1, err = cgroup1.New(s.v1Path, s.v1Resources(), cgroup1.WithHierarchy(s.v1Hierarchy))
	case 2:
		g.v2, err = cgroup2.NewManager(s.Root, s.Paths[""], s.v2Resources())
		if err == nil && s.Swap && s.Memory > 0 {
			// Only where swap is accounted; no swap for the job at all,
			// as v2 counts swap apart from memory.
			if exists(filepath.Join(s.dir(""), "memory.swap.max")) {
				zero := int64(0)
				err = g.v2.Update(&cgroup2.Resources{Memory: &cgroup2.Memory{Swap: &zero}})
			}
		}
	default:
		return nil, fmt.Errorf("cgroup: version %d", s.Version)
	}
	if err == nil && s.Version == 1 && s.Owner != 0 {
		for _, c := range s.keys() {
			if err = os.Chown(filepath.Join(s.dir(c), "tasks"), int(s.Owner), -1); err != nil {
				break
			}
		}
	}
	if err != nil {
		for _, d := range s.Dirs() {
			_ = os.Remove(d)
		}
		return nil, fmt.Errorf("cgroup: create %s: %w", strings.Join(s.Dirs(), ", "), err)
	}
	return g, nil
}

// Load finds an existing group; it fails with an error that is
// os.ErrNotExist when there is none.
func Load(s Spec) (*Group, error) {
	g := &Group{spec: s}
	found := false
	for _, d := range s.Dirs() {
		found = found || exists(d)
	}
	if !found {
		return nil, fmt.Errorf("cgroup: %s: %w", strings.Join(s.Dirs(), ", "), os.ErrNotExist)
	}
	var err error
	switch s.Version {
	case 1:
		g.v1, err = cgroup1.Load(s.v1Path, cgroup1.WithHierarchy(s.v1Hierarchy))
		if errors.Is(err, cgroup1.ErrCgroupDeleted) {
			err = fmt.Errorf("%w (%w)", err, os.ErrNotExist)
		}
	case 2:
		g.v2, err = cgroup2.Load(s.Paths[""], cgroup2.WithMountpoint(s.Root))
	default:
		err = fmt.Errorf("version %d", s.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup: load: %w", err)
	}
	return g, nil
}

// Remove kills what runs in the group described by s and removes it; no
// group is no error.
func Remove(s Spec) error {
	g, err := Load(s)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := g.Kill(killTimeout); err != nil {
		return err
	}
	return g.Delete()
}

// killTimeout bounds how long Remove keeps killing.
const killTimeout = 10 * time.Second

func (s Spec) v1Path(n cgroup1.Name) (string, error) {
	p, ok := s.Paths[string(n)]
	if !ok {
		return "", cgroup1.ErrControllerNotActive
	}
	return p, nil
}

func (s Spec) v1Hierarchy() ([]cgroup1.Subsystem, error) {
	var subs []cgroup1.Subsystem
	for _, c := range s.keys() {
		switch c {
		case "memory":
			subs = append(subs, cgroup1.NewMemory(s.Root))
		case "cpu":
			subs = append(subs, cgroup1.NewCpu(s.Root))
		case "freezer":
			subs = append(subs, cgroup1.NewFreezer(s.Root))
		case v1Accounting:
			subs = append(subs, cgroup1.NewCpuacct(s.Root))
		default:
			return nil, fmt.Errorf("cgroup: v1 controller %q is not used", c)
		}
	}
	return subs, nil
}

func (s Spec) v1Resources() *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if s.Memory > 0 {
		m := s.Memory
		r.Memory = &specs.LinuxMemory{Limit: &m}
		if s.Swap {
			// memsw is memory+swap: equal to the limit, no swap at all.
			sw := m
			r.Memory.Swap = &sw
		}
	}
	if s.CPUs > 0 {
		quota, period := int64(s.CPUs)*cfsPeriod, uint64(cfsPeriod)
		r.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
	}
	return r
}

func (s Spec) v2Resources() *cgroup2.Resources {
	r := &cgroup2.Resources{}
	if s.Memory > 0 {
		m := s.Memory
		r.Memory = &cgroup2.Memory{Max: &m}
	}
	if s.CPUs > 0 {
		quota, period := int64(s.CPUs)*cfsPeriod, uint64(cfsPeriod)
		r.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)}
	}
	return r
}

// Start starts cmd inside the group, so that the job is confined from its
// first instruction and every process it forks is too.
//
// The caller never enters the group: whoever kills the group (the agent,
// another shim of the same job) would kill it too. Instead cmd is started
// behind a gate: bash, waiting on a pipe, is moved into the group (all
// hierarchies), and only then released to exec cmd (same pid, same process
// group), so the job's own code never runs outside. The gate is bash's
// startup and one read, charged to the caller's group. (On v2, clone3's
// CLONE_INTO_CGROUP could place the child directly; the gate works on every
// kernel and both versions, and is the one path tested on this host.)
func (g *Group) Start(cmd *exec.Cmd) error {
	gt, err := startGated(cmd, nil)
	if err != nil {
		return err
	}
	return gt.enter(g)
}

// StartIn starts cmd behind the gate, makes the group of s meanwhile (while
// bash starts), moves cmd into it and releases it: Create and Start in one,
// with bash's start and the group's making overlapped. On v1 the released
// bash moves itself (see startGated), which spares the kernel's wait for a
// grace period. The job's own code still never runs outside the group. A
// group that cannot be made fails with a *CreateError, and nothing is left
// of it or of cmd.
func StartIn(s Spec, cmd *exec.Cmd) (*Group, error) {
	var selfMove []string
	if s.Version == 1 {
		for _, c := range s.keys() {
			selfMove = append(selfMove, filepath.Join(s.dir(c), "tasks"))
		}
	}
	gt, err := startGated(cmd, selfMove)
	if err != nil {
		return nil, err
	}
	g, err := Create(s)
	if err != nil {
		gt.abort()
		return nil, &CreateError{Err: err}
	}
	if err := gt.enter(g); err != nil {
		_ = g.Delete()
		return nil, err
	}
	return g, nil
}

// CreateError says that the job's group could not be made.
type CreateError struct{ Err error }

func (e *CreateError) Error() string { return e.Err.Error() }
func (e *CreateError) Unwrap() error { return e.Err }

// bashPath is where bash is, looked up once per process.
var bashPath = sync.OnceValues(func() (string, error) { return exec.LookPath("bash") })

// gate is a started command waiting, in bash, for a line on its gate pipe.
// With moved set, the gated bash moves itself into the group once released
// and says so on ack.
type gate struct {
	cmd   *exec.Cmd
	w     *os.File
	moves bool
	ack   *os.File
}

// startGated starts cmd behind the gate. selfMove, when given, are v1
// `tasks` files the released bash writes itself into ("0": the writer)
// before anything else, instead of the caller writing its pid into each
// group's cgroup.procs.
//
// Why: moving another process takes the kernel's global threadgroup lock,
// and taking it waits for an RCU grace period, with the cgroup mutex held
// (every cgroup mkdir and rmdir on the host waits too): 4-14 ms per job on
// this VM, most of a trivial job's start. A thread that moves itself (pid 0
// written to v1 `tasks`) needs no such lock; bash has a single thread, so
// moving it moves the process. v2 has no such file (cgroup.procs moves the
// whole process and takes the lock either way).
func startGated(cmd *exec.Cmd, selfMove []string) (*gate, error) {
	bash, err := bashPath()
	if err != nil {
		return nil, fmt.Errorf("cgroup: the start gate needs bash: %w", err)
	}
	// Every pipe the gate needs: closed on any failure, the child's ends
	// also once it has started (it holds its own copies).
	var parentEnds, childEnds []*os.File
	fail := func(err error) (*gate, error) {
		closeFiles(parentEnds)
		closeFiles(childEnds)
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			parentEnds, childEnds = append(parentEnds, w), append(childEnds, r)
		}
		return r, w, err
	}
	// The child's descriptors, from 3 on: after cmd's own extra files,
	// the gate's pipe, the ack's (with selfMove), the startup file's (for
	// `bash FILE`).
	var extra []*os.File
	fd := func(f *os.File) int {
		extra = append(extra, f)
		return 3 + len(cmd.ExtraFiles) + len(extra) - 1
	}
	gr, gw, err := pipe()
	if err != nil {
		return fail(err)
	}
	gt := &gate{cmd: cmd, w: gw}
	gateFD := fd(gr)
	open := fmt.Sprintf("read -r -u %d _ || exit 126; ", gateFD)
	closeFDs := fmt.Sprintf("exec %d<&-", gateFD)
	if len(selfMove) > 0 {
		ackR, ackW, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		// The ack's ends are the other way round: the child writes.
		parentEnds, childEnds = append(parentEnds, ackR), append(childEnds, ackW)
		gt.ack, gt.moves = ackR, true
		ackFD := fd(ackW)
		moves := make([]string, len(selfMove))
		for i, f := range selfMove {
			moves[i] = "echo 0 >" + shellQuote(f)
		}
		// The job's own code runs only once bash is in every hierarchy;
		// the ack tells the caller so (EOF: it could not move).
		open += fmt.Sprintf("{ %s; } 2>/dev/null || exit 126; echo >&%d; ", strings.Join(moves, " && "), ackFD)
		closeFDs += fmt.Sprintf(" %d>&-", ackFD)
	}
	// For `bash FILE`: bash's startup file, and the pipe it goes in.
	var startup string
	var startupW *os.File
	switch {
	case len(cmd.Args) >= 3 && filepath.Base(cmd.Path) == "bash" && cmd.Args[1] == "-c":
		// The job is a bash script already: the gate is its first line,
		// and the job's bash is the one moved (no second exec).
		cmd.Args = append([]string{cmd.Args[0], "-c", open + closeFDs + "\n" + cmd.Args[2]}, cmd.Args[3:]...)
	case len(cmd.Args) >= 2 && filepath.Base(cmd.Path) == "bash" && !strings.HasPrefix(cmd.Args[1], "-"):
		// The job is `bash FILE`: a non-interactive bash reads $BASH_ENV
		// before FILE, in the same process, so the gate is that startup
		// file, handed over on a pipe. No second bash starts, and FILE
		// runs as a script, not sourced ($0, `return`, `caller` as without
		// the gate). The job's own BASH_ENV, if it has one, is read after
		// the gate (as a path: bash would also expand it).
		sr, sw, err := pipe()
		if err != nil {
			return fail(err)
		}
		// bash opens it by name (/dev/fd/N), which checks the pipe's owner:
		// a job run as another user gets a pipe of theirs, else bash would
		// not read the gate and would run FILE outside the group.
		if c := cmd.SysProcAttr; c != nil && c.Credential != nil && int(c.Credential.Uid) != os.Geteuid() {
			if err := sr.Chown(int(c.Credential.Uid), -1); err != nil {
				return fail(err)
			}
		}
		startupFD := fd(sr)
		env, own, had := withoutEnv(cmd.Environ(), "BASH_ENV")
		cmd.Env = append(env, fmt.Sprintf("BASH_ENV=/dev/fd/%d", startupFD))
		restore := "unset BASH_ENV"
		if had {
			restore = "export BASH_ENV=" + shellQuote(own) + `; . "$BASH_ENV"`
		}
		startup = open + closeFDs + fmt.Sprintf(" %d<&-; ", startupFD) + restore + "\n"
		startupW = sw
	default:
		gate := open + closeFDs + ` -a "$0" "$@"`
		path, argv0 := cmd.Path, cmd.Path
		if len(cmd.Args) > 0 {
			argv0 = cmd.Args[0]
		}
		cmd.Path = bash
		cmd.Args = append([]string{"bash", "-c", gate, argv0, path}, cmd.Args[min(1, len(cmd.Args)):]...)
	}
	// The startup file is a few hundred bytes: the pipe holds it whole, so
	// it is written before bash starts reading.
	if startupW != nil {
		_, err := startupW.WriteString(startup)
		parentEnds = slices.DeleteFunc(parentEnds, func(f *os.File) bool { return f == startupW })
		startupW.Close()
		if err != nil {
			return fail(err)
		}
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, extra...)
	err = cmd.Start()
	closeFiles(childEnds)
	childEnds = nil
	if err != nil {
		return fail(err)
	}
	return gt, nil
}

// closeFiles closes every file of fs.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// withoutEnv returns env without its entries for name, and the value that
// counted (the last), if any.
func withoutEnv(env []string, name string) (rest []string, value string, had bool) {
	rest = make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			value, had = v, true
			continue
		}
		rest = append(rest, kv)
	}
	return rest, value, had
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// enter moves the gated process into g and releases it: the caller moves
// it, or, started with selfMove, it moves itself once released, and enter
// returns once it has.
func (gt *gate) enter(g *Group) error {
	if !gt.moves {
		if err := g.add(gt.cmd.Process.Pid); err != nil {
			gt.abort()
			return fmt.Errorf("cgroup: place the job in %s: %w", strings.Join(g.spec.Dirs(), ", "), err)
		}
	}
	_, err := gt.w.Write([]byte("\n"))
	gt.w.Close()
	if err != nil {
		gt.abort()
		return fmt.Errorf("cgroup: release the job: %w", err)
	}
	if gt.moves {
		var b [1]byte
		n, _ := gt.ack.Read(b[:])
		gt.ack.Close()
		if n != 1 {
			gt.abort()
			return fmt.Errorf("cgroup: place the job in %s: it could not move there", strings.Join(g.spec.Dirs(), ", "))
		}
	}
	return nil
}

// abort ends the gated process before it ran anything of the job.
func (gt *gate) abort() {
	gt.w.Close()
	if gt.ack != nil {
		gt.ack.Close()
	}
	_ = gt.cmd.Process.Kill()
	_, _ = gt.cmd.Process.Wait()
}

// add moves a whole process (all its threads) into the group, in every
// hierarchy.
func (g *Group) add(pid int) error {
	var errs []error
	for _, c := range g.spec.keys() {
		if err := os.WriteFile(filepath.Join(g.spec.dir(c), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Procs lists the processes in the group and its subgroups, in every
// hierarchy (a process moved out of one is still found in another), but
// never the caller.
func (g *Group) Procs() ([]int, error) {
	seen := map[int]bool{}
	self := os.Getpid()
	for _, d := range g.spec.Dirs() {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			if e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			pids, err := readPids(p)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			for _, pid := range pids {
				if pid != self {
					seen[pid] = true
				}
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("cgroup: procs: %w", err)
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

// Signal sends sig to every process in the group: a graceful stop reaches
// what left the job's process group too.
func (g *Group) Signal(sig unix.Signal) error {
	pids, err := g.Procs()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("cgroup: signal %d: %w", pid, err)
		}
	}
	return nil
}

// Kill kills every process in the group and returns once it is empty, or
// fails after timeout. v2 has cgroup.kill (5.14+), which no fork escapes.
// Elsewhere the group is frozen so that nothing forks between listing and
// killing, every process gets SIGKILL, and the group is thawed so that the
// signals land; repeated until no process is left.
//
// The freezing is done here, not with the library's Freeze: that waits
// without a bound for the group to freeze, and a process in uninterruptible
// sleep (a hung NFS read) can keep it freezing for ever.
func (g *Group) Kill(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	killFile := filepath.Join(g.spec.dir(""), "cgroup.kill")
	useKill := g.spec.Version == 2 && exists(killFile)
	for {
		pids, err := g.Procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if useKill {
			if err := os.WriteFile(killFile, []byte("1"), 0); err != nil {
				return fmt.Errorf("cgroup: kill: %w", err)
			}
		} else {
			thaw := g.freeze()
			if pids, err = g.Procs(); err != nil {
				thaw()
				return err
			}
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			thaw()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %d processes still in %s after %v: %v", len(pids), strings.Join(g.spec.Dirs(), ", "), timeout, pids)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// freezeWait bounds how long Kill waits for a group to freeze before it
// kills anyway.
const freezeWait = 100 * time.Millisecond

// freeze asks the kernel to freeze the group and waits a little for it; the
// returned func thaws it. Without a freezer it does nothing.
func (g *Group) freeze() (thaw func()) {
	var file, frozen, thawed string
	var done func() bool
	switch g.spec.Version {
	case 1:
		if _, ok := g.spec.Paths["freezer"]; !ok {
			return func() {}
		}
		file = filepath.Join(g.spec.dir("freezer"), "freezer.state")
		frozen, thawed = "FROZEN", "THAWED"
		done = func() bool {
			b, err := os.ReadFile(file)
			return err != nil || strings.TrimSpace(string(b)) == frozen
		}
	case 2:
		dir := g.spec.dir("")
		file = filepath.Join(dir, "cgroup.freeze")
		frozen, thawed = "1", "0"
		done = func() bool {
			v, err := readKey(filepath.Join(dir, "cgroup.events"), "frozen")
			return err != nil || v == 1
		}
	}
	if err := os.WriteFile(file, []byte(frozen), 0); err != nil {
		return func() {}
	}
	for end := time.Now().Add(freezeWait); !done() && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	return func() { _ = os.WriteFile(file, []byte(thawed), 0) }
}

// OOMKills counts the processes of the group that the kernel killed for
// want of memory (v1 memory.oom_control, v2 memory.events: oom_kill). A v1
// kernel before 4.13 has no counter: a group still under OOM then counts 1.
func (g *Group) OOMKills() (uint64, error) {
	switch g.spec.Version {
	case 1:
		if _, ok := g.spec.Paths["memory"]; !ok {
			return 0, nil
		}
		file := filepath.Join(g.spec.dir("memory"), "memory.oom_control")
		n, err := readKey(file, "oom_kill")
		if errors.Is(err, errNoKey) {
			n, err = readKey(file, "under_oom")
		}
		return n, err
	case 2:
		n, err := readKey(filepath.Join(g.spec.dir(""), "memory.events"), "oom_kill")
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNoKey) {
			return 0, nil // no memory controller in this group
		}
		return n, err
	}
	return 0, nil
}

// Delete removes the empty group (Kill it first), in every hierarchy, with
// any groups the job made inside it. It is an rmdir per directory: the
// library's Delete lists every process and stats every control file of each
// hierarchy first, which costs a job's end more than the removal itself.
func (g *Group) Delete() error {
	var errs []error
	for _, d := range g.spec.Dirs() {
		if err := removeGroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cgroup: delete: %w", err)
	}
	return nil
}

// removeGroupDir removes the group directory d and the groups under it; one
// that is already gone is no error. The kernel refuses a group that still
// holds a process (EBUSY): that is tried again a few times, as a process
// killed a moment ago may still be leaving it.
func removeGroupDir(d string) error {
	var err error
	pause := 10 * time.Millisecond
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(pause)
			pause *= 2
		}
		err = unix.Rmdir(d)
		if errors.Is(err, unix.ENOTEMPTY) {
			// Not a cgroup file system (whose control files go with their
			// directory): a copy of one, as in tests.
			err = os.RemoveAll(d)
		}
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		// Groups the job made inside its own go first.
		if ents, rerr := os.ReadDir(d); rerr == nil {
			for _, e := range ents {
				if e.IsDir() {
					_ = removeGroupDir(filepath.Join(d, e.Name()))
				}
			}
		}
	}
	return fmt.Errorf("remove %s: %w", d, err)
}

var errNoKey = errors.New("cgroup: no such key")

// readKey reads the value of key from a flat-keyed file ("key value" lines).
func readKey(path, key string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%w %q in %s", errNoKey, key, path)
}

func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}
