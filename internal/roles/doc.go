// Package roles wires Berth's long-running roles into the command line:
// berth server (the control plane, with its local agent), berth agent (a
// compute node), berth shim (a job's supervisor, started by the agent) and
// berth ssh-host (a job's SSH server). It is the one package of the
// command line that links the server, the agent and the store; the
// client's commands (internal/cli) and the Slurm commands do not, and
// cmd/berth registers it with one line (cli.Register(roles.Register)),
// which the Slurm commands' lean build (-tags slim) leaves out.
package roles
