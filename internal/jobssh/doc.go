// Package jobssh is a job's SSH endpoint: an SSH server (x/crypto/ssh)
// whose sessions and forwarded connections are the job's. What "the
// job's" means is a Backend's business: Native runs a session as a
// process of the server's own (`berth ssh-host`, which a native dev
// environment runs inside its job, so its cgroup, user, environment and
// working directory are the job's); the shim of a container job serves
// the same protocol on the host and runs each session through the
// engine's exec (internal/agent/shim_ssh.go), since Berth's binary is not
// in the image; the shim of every other native job serves it too and
// starts each session as the job (StartCommand, with the job's
// credential, cgroup, environment and directory;
// internal/agent/shim_native_ssh.go).
//
// The endpoint listens on a Unix socket that only the node's agent
// reaches; the server opens a tunnel to it only for someone allowed into
// the run. So the SSH protocol itself asks for no authentication, and the
// host key is made afresh at each start.
//
// Sessions: exec and shell, with or without a pseudo-terminal (window
// changes, signals, exit statuses), env requests; and direct-tcpip (ssh
// -L, and VS Code's Remote-SSH forwarding). With Options.Inactivity the
// endpoint ends once no connection has been open for that long.
package jobssh
