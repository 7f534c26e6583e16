package roles

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/jobssh"
)

// `berth ssh-host` is a native job's SSH endpoint (internal/jobssh): a
// dev environment's job runs it after its init commands, so that what a
// session runs is a process of the job: its cgroup, its user, its
// environment, its working directory, its network. It listens on a socket
// in the job's own directory (api.SSHSocket in BERTH_JOB_DIR, 0600, the
// job's user's), which only that user and the node's agent reach. A job in
// a container has its endpoint served by its shim instead (Berth's binary
// is not in the image). With --inactivity, the endpoint ends the job
// (exit 0) once no SSH connection has been open for that long.

func newSSHHostCmd() *cobra.Command {
	var socket string
	var inactivity time.Duration
	cmd := &cobra.Command{
		Use:    "ssh-host",
		Short:  "Serve SSH sessions inside this job (a dev environment's endpoint)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				dir := os.Getenv("BERTH_JOB_DIR")
				if dir == "" {
					return errors.New("ssh-host: not inside a job (BERTH_JOB_DIR is not set); give --socket")
				}
				socket = filepath.Join(dir, api.SSHSocket)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_ = os.Remove(socket)
			ln, err := net.Listen("unix", socket)
			if err != nil {
				return fmt.Errorf("ssh-host: %w", err)
			}
			if err := os.Chmod(socket, 0o600); err != nil {
				ln.Close()
				return fmt.Errorf("ssh-host: %w", err)
			}
			logw := cmd.ErrOrStderr()
			fmt.Fprintf(logw, "berth ssh-host: serving SSH for this job\n")
			idle, err := jobssh.Serve(ctx, ln, jobssh.Native{}, jobssh.Options{Inactivity: inactivity})
			if idle {
				fmt.Fprintf(logw, "berth ssh-host: no SSH connection for %s (inactivity_duration): the job ends\n", inactivity)
			}
			if err != nil {
				return fmt.Errorf("ssh-host: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the socket to listen on (default $BERTH_JOB_DIR/"+api.SSHSocket+")")
	cmd.Flags().DurationVar(&inactivity, "inactivity", 0, "end once no SSH connection has been open for this long (0: never)")
	return cmd
}
