// Package cli holds Berth's commands: the roles (server, agent, the hidden
// shim) and the client commands (apply, ps, logs, stop, fleet, metrics,
// node, bench), built
// on cobra. Client commands talk to the server only through internal/client.
package cli
