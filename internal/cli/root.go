package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// Version is set at build time.
var Version = "dev"

// ExitError ends the program with a status, after its message (if any).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Main runs the command line and returns the process's exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// BERTH_CPU_PROFILE=PREFIX writes a CPU profile of this process to
	// PREFIX.COMMAND.PID, for performance work on any role.
	if prefix := os.Getenv("BERTH_CPU_PROFILE"); prefix != "" && len(args) > 0 {
		if f, err := os.Create(fmt.Sprintf("%s.%s.%d", prefix, args[0], os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	// BERTH_HEAP_PROFILE=PREFIX writes a heap profile of this process to
	// PREFIX.COMMAND.PID each time it gets SIGUSR1.
	if prefix := os.Getenv("BERTH_HEAP_PROFILE"); prefix != "" && len(args) > 0 {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			for range usr1 {
				runtime.GC()
				if f, err := os.Create(fmt.Sprintf("%s.%s.%d", prefix, args[0], os.Getpid())); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}()
	}
	if lean && !leanServes(args) {
		return execFull(args, stderr) // lean.go: the full binary does the rest
	}
	root := NewRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(stderr, "berth:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(stderr, "berth:", err)
	return 1
}

// NewRoot builds the command tree.
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "Berth schedules work on GPU and HPC clusters",
		Long:          "Berth schedules work on GPU and HPC clusters: dstack's YAML configurations and Slurm's scheduling in one binary.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	addFullCmds(root) // full.go; the lean build (lean.go) has the Slurm commands only
	for _, add := range registered {
		add(root) // register.go: the roles, the Slurm commands
	}
	return root
}

// Home is where Berth keeps its files: $BERTH_HOME, else ~/.berth.
func Home() string {
	if h := os.Getenv("BERTH_HOME"); h != "" {
		return h
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ".berth"
	}
	return filepath.Join(h, ".berth")
}

// ClientConfig is $BERTH_HOME/config.yml: where the server is and the token.
type ClientConfig struct {
	URL   string `yaml:"url"`
	Token string `yaml:"token"`
}

func configPath() string { return filepath.Join(Home(), "config.yml") }

func readClientConfig(path string) (ClientConfig, error) {
	var c ClientConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func writeClientConfig(path string, c ClientConfig) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// connection is the server URL and token for client commands: BERTH_URL and
// BERTH_TOKEN win over the config file.
func connection() (ClientConfig, error) {
	c, err := readClientConfig(configPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, err
	}
	if v := os.Getenv("BERTH_URL"); v != "" {
		c.URL = v
	}
	if v := os.Getenv("BERTH_TOKEN"); v != "" {
		c.Token = v
	}
	if c.URL == "" || c.Token == "" {
		return c, fmt.Errorf("no server configured: log in with `berth login URL` (it writes %s), set BERTH_URL and BERTH_TOKEN, or run on a node whose agent listens at %s (BERTH_SOCKET)", configPath(), socketPath())
	}
	return c, nil
}

// socketPath is where the local agent listens: $BERTH_SOCKET, else the
// well-known path ("none": no socket).
func socketPath() string {
	if p := os.Getenv("BERTH_SOCKET"); p != "" {
		return p
	}
	return api.DefaultSocket
}

// newClient is the client of the commands: a token given (BERTH_TOKEN, the
// config file) goes to the server's URL; with none, the local agent's
// socket, when there is one, vouches for this Unix user.
func newClient() (*client.Client, error) {
	c, err := connection()
	if err == nil {
		return client.New(c.URL, c.Token), nil
	}
	if c.Token == "" && socketPath() != "none" {
		if fi, serr := os.Stat(socketPath()); serr == nil && fi.Mode()&os.ModeSocket != 0 {
			return client.NewUnix(socketPath()), nil
		}
	}
	return nil, err
}

// newStepClient is the client of a job's own calls on its run (srun's
// steps, the step hosts): the run's credential (BERTH_JOB_TOKEN, with the
// agent's BERTH_URL) where the job has one, else newClient's.
func newStepClient() (*client.Client, error) {
	if tok, url := os.Getenv("BERTH_JOB_TOKEN"), os.Getenv("BERTH_URL"); tok != "" && url != "" {
		return client.New(url, tok), nil
	}
	return newClient()
}
