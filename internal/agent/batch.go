package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
)

// A Slurm batch script (api.BatchScript) runs as slurmd runs one: the
// script written to the job's directory as slurm_script, run by its "#!"
// interpreter with its arguments (its process is the batch shell), its
// standard input, output and error opened by the shim on the files the
// server named, as the job's user. Its output goes to those files, not to
// the job's log.

// fileBatchScript is the name of a batch job's script, as slurmd's.
const fileBatchScript = "slurm_script"

// scriptFile is the name of the file the job's commands are written to.
func scriptFile(asg api.Assignment) string {
	if isBatch(asg) {
		return fileBatchScript
	}
	return fileScript
}

// isBatch says whether the job is a batch script the shim runs itself.
func isBatch(asg api.Assignment) bool {
	return asg.Batch != nil && asg.Container == nil && len(asg.Commands) == 1
}

// jobScript is the text of the job's script file: a batch script as it
// was submitted, else the commands joined (script).
func jobScript(asg api.Assignment) string {
	if isBatch(asg) {
		return asg.Commands[0]
	}
	return script(asg.Commands)
}

// interpreter is the script's "#!" line as the kernel reads it: the
// program and at most one argument (the rest of the line); /bin/sh
// without one.
func interpreter(script string) []string {
	if !strings.HasPrefix(script, "#!") {
		return []string{"/bin/sh"}
	}
	line, _, _ := strings.Cut(script[2:], "\n")
	line = strings.TrimSpace(line)
	prog, arg, ok := strings.Cut(line, " ")
	if !ok {
		prog, arg, _ = strings.Cut(line, "\t")
	}
	arg = strings.TrimSpace(arg)
	switch {
	case prog == "":
		return []string{"/bin/sh"}
	case arg == "":
		return []string{prog}
	}
	return []string{prog, arg}
}

// batchCommand is the command that runs the batch script at path.
func batchCommand(b *api.BatchScript, text, path string) *exec.Cmd {
	argv := append(interpreter(text), path)
	argv = append(argv, b.Args...)
	return exec.Command(argv[0], argv[1:]...)
}

// batchStdio opens the batch script's standard input, output and error as
// the job's user (cred; nil: as this process), creating the output files
// as slurmd does (truncated unless --open-mode=append). A file that cannot
// be opened fails the job in slurmstepd's words.
func batchStdio(b *api.BatchScript, cred *jobCred) (files []*os.File, err error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !b.Append {
		flags |= os.O_TRUNC
	}
	err = asUser(cred, func() error {
		in, err := os.Open(b.Input)
		if err != nil {
			return slurmstepdError("stdin", b.Input, err)
		}
		files = append(files, in)
		out, err := os.OpenFile(b.Output, flags, 0o666)
		if err != nil {
			return slurmstepdError("stdout", b.Output, err)
		}
		files = append(files, out)
		if b.Error == "" || b.Error == b.Output {
			files = append(files, out)
			return nil
		}
		errf, err := os.OpenFile(b.Error, flags, 0o666)
		if err != nil {
			return slurmstepdError("stderr", b.Error, err)
		}
		files = append(files, errf)
		return nil
	})
	if err != nil {
		closeFiles(files)
		return nil, err
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for i, f := range files {
		if i == 0 || f != files[i-1] {
			f.Close()
		}
	}
}

// slurmstepdError is slurmstepd's message for a file it cannot open
// (io.c: "Could not open stdout file %s: %m").
func slurmstepdError(stream, path string, err error) error {
	msg := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg = errno.Error()
	}
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return fmt.Errorf("slurmstepd: error: Could not open %s file %s: %s", stream, path, msg)
}

// loginEnv, for a script whose interpreter is a login shell (#!/bin/bash
// -l) and a node with the Slurm-named links, writes the file the job's
// BASH_ENV names: bash -l reads the profile first (which resets PATH), then
// $BASH_ENV, which puts the links' directory back on PATH and hands over
// to the job's own BASH_ENV, if any. It returns the variable to add ("":
// none).
func loginEnv(b *api.BatchScript, text, scriptPath string, env []string, cred *jobCred) (string, error) {
	login := false
	for _, a := range strings.Fields(strings.Join(interpreter(text)[1:], " ")) {
		login = login || a == "--login" || strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "l")
	}
	if !login || b.Links == "" {
		return "", nil
	}
	dir := shellQuote(b.Links)
	body := fmt.Sprintf("case \":$PATH:\" in *:%s:*) ;; *) PATH=%s:$PATH ;; esac\n", dir, dir)
	own := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "BASH_ENV="); ok {
			own = v
		}
	}
	if own != "" {
		body += fmt.Sprintf("export BASH_ENV=%s; . \"$BASH_ENV\"\n", shellQuote(own))
	} else {
		body += "unset BASH_ENV\n"
	}
	path := scriptPath + ".env"
	err := asUser(cred, func() error {
		return os.WriteFile(path, []byte(body), 0o600)
	})
	if err != nil {
		return "", err
	}
	return "BASH_ENV=" + path, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// asUser runs f with the file system identity of cred (nil: this
// process's): on a thread of its own whose fsuid, fsgid and groups are
// the user's, so that f's files are checked and created as theirs. The
// thread is never handed back to the runtime: it ends with f.
func asUser(cred *jobCred, f func() error) error {
	if cred == nil || (int(cred.UID) == os.Geteuid() && int(cred.GID) == os.Getegid()) {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		groups := cred.Groups
		if len(groups) == 0 {
			groups = []uint32{cred.GID}
		}
		// Per thread: the raw system calls, not syscall.Setgroups, which
		// changes every thread of the process.
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(unsafe.Pointer(&groups[0])), 0); e != 0 {
			done <- fmt.Errorf("setgroups: %w", e)
			return
		}
		_ = unix.Setfsgid(int(cred.GID))
		_ = unix.Setfsuid(int(cred.UID))
		if got, _ := unix.SetfsuidRetUid(-1); got != int(cred.UID) {
			done <- fmt.Errorf("cannot act as uid %d (fsuid %d)", cred.UID, got)
			return
		}
		done <- f()
	}()
	return <-done
}
