package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// A fleet's worker: installs the agent on its hosts, or uninstalls it, one
// goroutine per host, recording each host's step before taking it.

// fleetRegisterTimeout is how long an installed agent has to register.
const fleetRegisterTimeout = 90 * time.Second

// errSuperseded stops a worker whose fleet was applied or deleted again
// meanwhile: the new worker takes over from the recorded state.
var errSuperseded = errors.New("fleet: superseded by a newer apply or delete")

// fleetJob is one worker's view of its fleet.
type fleetJob struct {
	s      *Server
	name   string
	f      *store.Fleet
	spec   *spec.Fleet
	keys   map[string]string
	mu     sync.Mutex
	rec    *fleetRecord
	status string
	gen    string // the hosts column as last read or written: another writer changes it
}

// save records the fleet's state, unless someone else changed it since
// this worker last did (errSuperseded).
func (j *fleetJob) save(ctx context.Context) error {
	j.s.fleets.mu.Lock()
	defer j.s.fleets.mu.Unlock()
	cur, err := j.s.store.GetFleet(ctx, j.name)
	if err != nil {
		return err
	}
	if cur.Hosts != j.gen || cur.Status != j.f.Status {
		return errSuperseded
	}
	j.mu.Lock()
	hj, _ := json.Marshal(j.rec)
	status := j.status
	j.mu.Unlock()
	if err := j.s.store.SetFleetState(ctx, j.name, status, string(hj)); err != nil {
		return err
	}
	j.gen, j.f.Status = string(hj), status
	return nil
}

// set moves host h to state (with a message) and records it.
func (j *fleetJob) set(ctx context.Context, h *fleetHost, state, msg string) error {
	j.mu.Lock()
	h.State, h.Message = state, msg
	j.mu.Unlock()
	j.s.log.Info("fleet host", "fleet", j.name, "node", h.Node, "host", h.Host, "state", state, "message", msg)
	return j.save(ctx)
}

func (s *Server) fleetWork(ctx context.Context, name string) {
	err := s.fleetWorkErr(ctx, name)
	switch {
	case err == nil, errors.Is(err, errSuperseded), errors.Is(err, store.ErrNotFound), ctx.Err() != nil:
	default:
		s.log.Error("fleet: worker failed", "fleet", name, "err", err)
	}
}

func (s *Server) fleetWorkErr(ctx context.Context, name string) error {
	f, err := s.store.GetFleet(ctx, name)
	if err != nil {
		return err
	}
	if f.Status != api.FleetProvisioning && f.Status != api.FleetDeleting {
		return nil
	}
	rec, sp, err := readRecord(f)
	if err != nil {
		return err
	}
	if sp.Nodes != nil {
		if f.Status == api.FleetDeleting {
			return s.deleteBackendFleet(ctx, name, rec.Force) // fleet_backend.go
		}
		return nil // the autoscaler keeps it
	}
	j := &fleetJob{s: s, name: name, f: f, spec: sp, rec: rec, status: f.Status, gen: f.Hosts}
	plain, err := s.secrets.open(f.ProjectID, fleetKeySealName(name), f.SSHKey)
	if err == nil {
		err = json.Unmarshal(plain, &j.keys)
	}
	if err != nil {
		return fmt.Errorf("fleet %s: its keys do not open with %s: %w", name, s.secrets.source, err)
	}
	if f.Status == api.FleetDeleting {
		return j.delete(ctx)
	}
	return j.provision(ctx)
}

// each runs fn for every host matching, in parallel, and returns the
// first error that stops the worker (superseded, or the store's).
func (j *fleetJob) each(ctx context.Context, match func(*fleetHost) bool, fn func(*fleetHost) error) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(j.rec.Hosts))
	for _, h := range j.rec.Hosts {
		if !match(h) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(h); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func (j *fleetJob) provision(ctx context.Context) error {
	err := j.each(ctx, func(h *fleetHost) bool {
		return h.State != api.HostReady && h.State != api.HostFailed && h.State != api.HostRemoved
	},
		func(h *fleetHost) error {
			if h.State == api.HostRemoving {
				return j.uninstall(ctx, h, false)
			}
			return j.install(ctx, h)
		})
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.rec.Hosts = removeRemoved(j.rec.Hosts)
	var failed *fleetHost
	for _, h := range j.rec.Hosts {
		if h.State == api.HostFailed && failed == nil {
			failed = h
		}
	}
	rollback := j.rec.AllOrNothing && failed != nil
	j.mu.Unlock()
	if rollback {
		why := fmt.Sprintf("rolled back (--all-or-nothing): %s failed: %s", failed.Node, failed.Message)
		err := j.each(ctx, func(h *fleetHost) bool { return h.State != api.HostPending && h.State != api.HostRemoved },
			func(h *fleetHost) error { return j.uninstall(ctx, h, true) })
		if err != nil {
			return err
		}
		j.mu.Lock()
		for _, h := range j.rec.Hosts {
			h.State, h.Message = api.HostFailed, why
		}
		j.rec.Message, j.status = why, api.FleetFailed
		j.mu.Unlock()
		return j.save(ctx)
	}
	j.mu.Lock()
	j.status, j.rec.Message = fleetSummary(j.rec)
	j.mu.Unlock()
	return j.save(ctx)
}

func removeRemoved(hs []*fleetHost) []*fleetHost {
	out := hs[:0:0]
	for _, h := range hs {
		if h.State != api.HostRemoved {
			out = append(out, h)
		}
	}
	return out
}

func (j *fleetJob) delete(ctx context.Context) error {
	err := j.each(ctx, func(h *fleetHost) bool { return h.State != api.HostRemoved },
		func(h *fleetHost) error { return j.uninstall(ctx, h, j.rec.Force) })
	if err != nil {
		return err
	}
	j.mu.Lock()
	var left []string
	for _, h := range j.rec.Hosts {
		if h.State != api.HostRemoved {
			left = append(left, fmt.Sprintf("%s (%s)", h.Node, h.Message))
		}
	}
	j.mu.Unlock()
	if len(left) > 0 && !j.rec.Force {
		j.mu.Lock()
		j.status, j.rec.Message = api.FleetFailed, "delete: not uninstalled from "+strings.Join(left, ", ")+"; delete again to retry, or with --force to forget them"
		j.mu.Unlock()
		return j.save(ctx)
	}
	j.s.fleets.mu.Lock()
	defer j.s.fleets.mu.Unlock()
	cur, err := j.s.store.GetFleet(ctx, j.name)
	if err != nil {
		return err
	}
	if cur.Hosts != j.gen {
		return errSuperseded
	}
	j.s.log.Info("fleet deleted", "fleet", j.name)
	if err := j.s.store.DeleteFleet(ctx, j.name); err != nil {
		return err
	}
	j.s.syncFleetOwners(ctx) // fleet_owners.go
	return nil
}

// hostFacts is what the check script found.
type hostFacts struct {
	os, arch, init string
	cpus           int
	memKB, diskKB  int64
	gpus           []string
	docker, sysctl bool
	uid            int
}

// checkScript reports the host's facts as key=value lines; dir is where
// the agent goes (its nearest existing parent's free space counts).
func checkScript(dir string) string {
	return `echo "os=$(uname -s)"; echo "arch=$(uname -m)"
echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
echo "mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu=/'; fi
if command -v docker >/dev/null 2>&1; then echo docker=yes; fi
if command -v systemctl >/dev/null 2>&1; then echo systemctl=yes; fi
d=` + shellQuote(dir) + `; while [ ! -d "$d" ]; do d=$(dirname "$d"); done
echo "disk_kb=$(df -Pk "$d" | awk 'NR==2 {print $4}')"
echo "init=$(cat /proc/1/comm 2>/dev/null)"
echo "uid=$(id -u)"
`
}

func parseFacts(out string) hostFacts {
	var f hostFacts
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "os":
			f.os = v
		case "arch":
			f.arch = v
		case "cpus":
			f.cpus, _ = strconv.Atoi(v)
		case "mem_kb":
			f.memKB, _ = strconv.ParseInt(v, 10, 64)
		case "gpu":
			f.gpus = append(f.gpus, strings.ReplaceAll(v, ", ", " ")+"MiB")
		case "docker":
			f.docker = true
		case "systemctl":
			f.sysctl = true
		case "disk_kb":
			f.diskKB, _ = strconv.ParseInt(v, 10, 64)
		case "init":
			f.init = v
		case "uid":
			f.uid, _ = strconv.Atoi(v)
		}
	}
	return f
}

// goArch is uname -m's machine as Go names it.
func goArch(machine string) string {
	switch machine {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "armv7l", "armv6l":
		return "arm"
	case "ppc64le":
		return "ppc64le"
	case "s390x":
		return "s390x"
	case "riscv64":
		return "riscv64"
	}
	return machine
}

func unitName(node string) string { return "berth-agent-" + node + ".service" }

// install takes h from wherever it stopped to ready. Each step is
// idempotent, so a step that a crash interrupted is simply taken again.
func (j *fleetJob) install(ctx context.Context, h *fleetHost) error {
	fail := func(format string, args ...any) error {
		return j.set(ctx, h, api.HostFailed, fmt.Sprintf(format, args...))
	}
	if err := j.set(ctx, h, api.HostConnecting, ""); err != nil {
		return err
	}
	j.mu.Lock()
	known := h.Keys
	j.mu.Unlock()
	conn, err := dialHost(ctx, h.Config, j.keys, &known)
	if err != nil {
		return fail("%v", err)
	}
	defer conn.Close()
	j.mu.Lock()
	h.Keys = known
	j.mu.Unlock()
	dir := h.Config.InstallDir
	out, err := conn.run(ctx, checkScript(dir), nil, false)
	if err != nil {
		return fail("check the host: %v", err)
	}
	facts := parseFacts(out)
	sudo := facts.uid != 0
	j.mu.Lock()
	h.OS, h.Arch, h.CPUs, h.Memory, h.GPUs, h.Docker, h.FreeDisk = facts.os, goArch(facts.arch), facts.cpus, facts.memKB<<10, facts.gpus, facts.docker, facts.diskKB<<10
	h.Service = "nohup"
	if facts.init == "systemd" && facts.sysctl {
		h.Service = "systemd"
	}
	j.mu.Unlock()
	if err := j.set(ctx, h, api.HostChecked, ""); err != nil {
		return err
	}
	if facts.os != "Linux" {
		return fail("the host runs %s; the agent runs on Linux only", facts.os)
	}
	binPath, err := j.s.fleetBinary(goArch(facts.arch))
	if err != nil {
		return fail("%v", err)
	}
	bin, err := os.Open(binPath)
	if err != nil {
		return fail("the berth binary for the host: %v", err)
	}
	defer bin.Close()
	if st, err := bin.Stat(); err == nil && facts.diskKB<<10 < 2*st.Size() {
		return fail("%s has %d MiB free; the agent needs %d MiB", dir, facts.diskKB>>10, 2*st.Size()>>20)
	}
	q := shellQuote(dir)
	if _, err := conn.run(ctx, "set -e; umask 022; mkdir -p "+q+"; cat > "+q+"/berth.new; chmod 755 "+q+"/berth.new; mv -f "+q+"/berth.new "+q+"/berth", bin, sudo); err != nil {
		return fail("upload the agent: %v", err)
	}
	if err := j.set(ctx, h, api.HostUploaded, ""); err != nil {
		return err
	}

	// A fresh credential each time: the old one (if a crash left one) is
	// revoked first, and the new one is recorded before it is used.
	if h.TokenID != "" {
		_, _ = j.s.store.RevokeToken(ctx, h.TokenID)
		j.s.forgetTokens(func(c cachedCred) bool { return c.tok != nil && c.tok.ID == h.TokenID })
	}
	secret, tok, err := j.s.nodeToken(ctx, h.Node, "fleet "+j.name, true, time.Time{})
	if err != nil {
		return err
	}
	j.mu.Lock()
	h.TokenID = tok.ID
	j.mu.Unlock()
	if err := j.save(ctx); err != nil {
		return err
	}
	env := "BERTH_TOKEN=" + secret + "\nBERTH_HOME=" + dir + "/home\n"
	for _, v := range j.spec.Env {
		if !v.PassThrough {
			env += v.Name + "=" + v.Value + "\n"
		}
	}
	args := []string{dir + "/berth", "agent", "--server", j.f.ServerURL, "--name", h.Node, "--fleet", j.name,
		"--data-dir", dir + "/data", "--socket", dir + "/berth.sock", "--spool-dir", dir + "/spool"}
	if h.Config.InternalIP != "" {
		args = append(args, "--addr", h.Config.InternalIP)
	}
	if b := blocksFlag(h.Config.Blocks); b != "" {
		args = append(args, "--blocks", b) // fleet_backend.go
	}
	if j.spec.Placement == "cluster" {
		// Multi-node runs stay within one network segment (sched).
		seg := j.spec.SSHConfig.Network
		if seg == "" {
			seg = "fleet-" + j.name
		}
		args = append(args, "--features", sched.SegmentFeature+seg)
	}
	var quoted []string
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	cmdline := strings.Join(quoted, " ")
	script := "set -e; umask 077; mkdir -p " + q + "/home " + q + "/data " + q + "/spool; cat > " + q + "/agent.env\n" + stopScript(dir, h.Node)
	if h.Service == "systemd" {
		unit := fmt.Sprintf("[Unit]\nDescription=Berth agent %s (fleet %s)\nAfter=network-online.target\n\n[Service]\nEnvironmentFile=%s/agent.env\nExecStart=%s\nRestart=always\nRestartSec=2\nKillMode=process\n\n[Install]\nWantedBy=multi-user.target\n",
			h.Node, j.name, dir, strings.Join(args, " "))
		script += "umask 022; cat > /etc/systemd/system/" + unitName(h.Node) + " <<'BERTH_UNIT'\n" + unit + "BERTH_UNIT\nsystemctl daemon-reload; systemctl enable --now " + unitName(h.Node) + " >/dev/null\n"
	} else {
		// The supervisor restarts the agent when it exits; it leads its own
		// process group, so stopping kills the group.
		sup := "#!/bin/sh\n# berth agent " + h.Node + " of fleet " + j.name + ", kept running\nset -a; . " + q + "/agent.env; set +a\nwhile :; do " + cmdline + "; sleep 2; done\n"
		script += "umask 022; cat > " + q + "/supervise.sh <<'BERTH_SUP'\n" + sup + "BERTH_SUP\nchmod 755 " + q + "/supervise.sh\n" +
			"setsid " + q + "/supervise.sh </dev/null >>" + q + "/agent.log 2>&1 &\necho $! > " + q + "/agent.pid\n"
	}
	if _, err := conn.run(ctx, script, strings.NewReader(env), sudo); err != nil {
		return fail("install the agent: %v", err)
	}
	if err := j.set(ctx, h, api.HostInstalled, ""); err != nil {
		return err
	}
	if err := j.s.waitNode(ctx, h.Node, func(n *api.Node) bool { return n.Status != "offline" && n.Status != "unreachable" }, fleetRegisterTimeout); err != nil {
		logTail, _ := conn.run(ctx, "tail -n 5 "+q+"/agent.log 2>/dev/null || journalctl -u "+unitName(h.Node)+" -n 5 --no-pager 2>/dev/null", nil, sudo)
		return fail("the agent did not register within %s; its log ends: %s", fleetRegisterTimeout, strings.TrimSpace(logTail))
	}
	// A host removed from the fleet and added again comes back drained by
	// the fleet: lift that drain (never an administrator's).
	drainedByFleet := false
	_ = j.s.waitNode(ctx, h.Node, func(n *api.Node) bool {
		drainedByFleet = n.Drain != nil && n.Drain.By == fleetDrainer
		return true
	}, time.Second)
	if drainedByFleet {
		if _, err := j.s.do(control.DrainInput{Node: h.Node, By: fleetDrainer}); err != nil {
			return fail("resume the node: %v", err)
		}
	}
	return j.set(ctx, h, api.HostReady, "")
}

// fleetDrainer is who a fleet's drains are by.
const fleetDrainer = "fleet"

// fleetBinary is the berth binary for hosts of arch: the server's own,
// or one configured for that architecture (Config.FleetBinaries).
func (s *Server) fleetBinary(arch string) (string, error) {
	if p, ok := s.cfg.FleetBinaries[arch]; ok {
		return p, nil
	}
	if arch == runtime.GOARCH {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("this server's own binary: %w", err)
		}
		return self, nil
	}
	return "", fmt.Errorf("the host is %s and this server's berth binary is %s: give the server a binary for %s (berth server --fleet-binary %s=PATH)", arch, runtime.GOARCH, arch, arch)
}

// stopScript stops the host's agent, whichever way it was installed.
func stopScript(dir, node string) string {
	q, u := shellQuote(dir), "/etc/systemd/system/"+unitName(node)
	return "if [ -f " + u + " ]; then systemctl disable --now " + unitName(node) + " >/dev/null 2>&1 || true; rm -f " + u + "; systemctl daemon-reload || true; fi\n" +
		"if [ -f " + q + "/agent.pid ]; then p=$(cat " + q + "/agent.pid); kill -TERM -$p 2>/dev/null || true; i=0\n" +
		"  while kill -0 -$p 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n" +
		"  kill -KILL -$p 2>/dev/null || true; rm -f " + q + "/agent.pid; fi\n"
}

// uninstall drains h's node, waits for its jobs (unless force), stops and
// removes its agent and files, and revokes its credential.
func (j *fleetJob) uninstall(ctx context.Context, h *fleetHost, force bool) error {
	if h.State != api.HostRemoving {
		if err := j.set(ctx, h, api.HostRemoving, ""); err != nil {
			return err
		}
	}
	if _, err := j.s.do(control.DrainInput{Node: h.Node, Drain: &api.DrainRequest{Reason: "fleet " + j.name + ": host removed"}, By: fleetDrainer}); err == nil && !force {
		if err := j.s.waitNode(ctx, h.Node, func(n *api.Node) bool { return n.Jobs == 0 }, 0); err != nil {
			return err
		}
	}
	j.mu.Lock()
	known := h.Keys
	j.mu.Unlock()
	conn, err := dialHost(ctx, h.Config, j.keys, &known)
	if err != nil {
		if force {
			j.s.forgetNodeOf(ctx, h.Node, "fleet "+j.name+": host forgotten")
			return j.set(ctx, h, api.HostRemoved, fmt.Sprintf("forgotten, not uninstalled: %v", err))
		}
		return j.set(ctx, h, api.HostFailed, fmt.Sprintf("uninstall: %v", err))
	}
	defer conn.Close()
	dir := h.Config.InstallDir
	q := shellQuote(dir)
	script := stopScript(dir, h.Node) + "cd / && rm -rf " + q + "/berth " + q + "/berth.new " + q + "/agent.env " + q + "/agent.log " + q + "/supervise.sh " +
		q + "/data " + q + "/spool " + q + "/home " + q + "/berth.sock; rmdir " + q + " 2>/dev/null || true\n"
	uid, _ := conn.run(ctx, "id -u", nil, false)
	if _, err := conn.run(ctx, script, nil, strings.TrimSpace(uid) != "0"); err != nil {
		return j.set(ctx, h, api.HostFailed, fmt.Sprintf("uninstall: %v", err))
	}
	if h.TokenID != "" {
		_, _ = j.s.store.RevokeToken(ctx, h.TokenID)
		id := h.TokenID
		j.s.forgetTokens(func(c cachedCred) bool { return c.tok != nil && c.tok.ID == id })
	}
	j.s.forgetNodeOf(ctx, h.Node, "fleet "+j.name+": host removed")
	return j.set(ctx, h, api.HostRemoved, "")
}

// waitNode waits until node is known and ok says yes (timeout 0: as long
// as ctx lasts).
func (s *Server) waitNode(ctx context.Context, node string, ok func(*api.Node) bool, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	for {
		s.mu.Lock()
		nodes := s.Nodes()
		s.unlock()
		for i := range nodes {
			if nodes[i].Name == node && ok(&nodes[i]) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
