package roles

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/agent"
	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/cli"
	"github.com/berth-hq/berth/internal/client"
	rules "github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/server"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

func newServerCmd() *cobra.Command {
	var (
		listen, db, sync, agentName, agentFleet, policy, weights, policyFile string
		halfLife, nodeTimeout, unkillable, metricsRetention, blobRetention   time.Duration
		maxArray                                                             int
		maxScript                                                            int64
		maxUpload                                                            int64
		maxNodes                                                             int
		depth                                                                int
		noAgent                                                              bool
		metrics                                                              server.MetricsOptions
		grace                                                                time.Duration
		agentRes                                                             resourceFlags
		agentMon                                                             monitorFlags
		autoUsers                                                            bool
		allowUsers, privateData                                              []string
		fleetBinaries                                                        map[string]string
		agentSocket                                                          string
		agentRunAs                                                           runAsFlags
		cloudPause                                                           time.Duration
		replicaOpts                                                          replicaFlags
		sshListen                                                            string
		gatewayDomain                                                        string
		gatewayTLSCert, gatewayTLSKey, gatewayTLSListen                      string
	)
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane (and, by default, an agent for this host)",
		Long: `Run the control plane: the HTTP API, the scheduler and the state in SQLite under $BERTH_HOME
(default ~/.berth). On first start it creates an admin token and writes the client configuration
($BERTH_HOME/config.yml), so that the commands on this machine need no set-up. Unless
--no-local-agent is given, an agent for this host runs in the same process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			home := cli.Home()
			if db == "" {
				db = os.Getenv("BERTH_DB")
			}
			if db == "" {
				db = filepath.Join(home, "server", "berth.db")
				// Berth's own directories are the server's user's only
				// (0700), including those an older version made 0755.
				for _, d := range []string{home, filepath.Join(home, "server")} {
					if err := os.MkdirAll(d, 0o700); err != nil {
						return err
					}
					if err := os.Chmod(d, 0o700); err != nil {
						return err
					}
				}
			}
			st, unlock, err := openStore(ctx, db, sync, cmd.Flags().Changed("sync"), replicaOpts.on)
			if err != nil {
				return err
			}
			defer unlock()
			defer st.Close()
			errc := make(chan error, 8)
			var rp *replica // --replica: follows until it leads (replica.go)
			var hs *http.Server
			if replicaOpts.on {
				if rp, err = startReplica(st, listen, replicaOpts, log); err != nil {
					return err
				}
				hs = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
				go func() { errc <- hs.Serve(rp.ln) }()
				defer hs.Close()
				if _, err := rp.waitLead(ctx); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
			if err := server.ParseGatewayDomain(gatewayDomain); err != nil {
				return err
			}
			if err := server.LoadGatewayTLS(gatewayTLSCert, gatewayTLSKey); err != nil {
				return err
			}
			private, err := parsePrivateData(privateData)
			if err != nil {
				return err
			}
			pol, err := sched.ParsePolicy(policy)
			if err != nil {
				return err
			}
			wts, err := parseWeights(weights)
			if err != nil {
				return err
			}
			rules, err := loadRules(policyFile, home)
			if err != nil {
				return err
			}
			if policyFile == "" {
				policyFile = filepath.Join(home, "policy.yml")
			}
			key, keySource, err := server.LoadSecretsKey(secretsKeyDir(db, home), os.Getenv)
			if err != nil {
				return err
			}
			providers, closeProviders, err := cloudProviders(ctx, rules, db) // cloud.go
			if err != nil {
				return err
			}
			defer closeProviders()
			srv, err := server.New(ctx, server.Config{SecretsKey: key, SecretsKeySource: keySource, Store: st, Logger: log, StopGrace: grace, Policy: pol, Weights: wts, HalfLife: halfLife, Depth: depth, Rules: rules,
				PolicyFile: policyFile, NodeTimeout: nodeTimeout, UnkillableTimeout: unkillable, MetricsRetention: metricsRetention, MaxArraySize: maxArray, MaxScriptBytes: maxScript, MaxUploadBytes: maxUpload, BlobRetention: blobRetention, MaxNodesPerRun: maxNodes,
				Metrics: server.NewMetrics(metricsOptions(metrics)), NoAutoUsers: !autoUsers, AllowUsers: allowUsers,
				PrivateData: private, GatewayDomain: gatewayDomain, GatewayTLSCert: gatewayTLSCert, GatewayTLSKey: gatewayTLSKey, FleetBinaries: fleetBinaries, Providers: providers, CloudPauseAfterRecord: cloudPause})
			if err != nil {
				return err
			}
			// SIGHUP reloads the policy file, as scontrol reconfigure
			// does slurm.conf; ReloadPolicy logs what came of it.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-hup:
						_ = srv.ReloadPolicy()
					}
				}
			}()
			var ln net.Listener
			url := ""
			if rp == nil {
				if ln, err = net.Listen("tcp", listen); err != nil {
					return fmt.Errorf("listen on %s: %w", listen, err)
				}
				url = "http://" + ln.Addr().String()
			} else {
				url = rp.self
			}
			srv.SetCloudURL(url)
			if _, err := adminToken(ctx, srv, url); err != nil {
				return err
			}
			if rp == nil {
				hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
				go func() { errc <- hs.Serve(ln) }()
			} else {
				rp.lead(srv.Handler())
				go func() { errc <- rp.leaseCheck(ctx) }()
			}
			go func() { errc <- srv.Run(ctx) }()
			if gatewayTLSCert != "" { // HTTPS beside the plain listener (server/gateway_tls.go)
				tln, err := net.Listen("tcp", gatewayTLSListen)
				if err != nil {
					return fmt.Errorf("--gateway-tls-listen %s: %w", gatewayTLSListen, err)
				}
				go func() { errc <- srv.ServeTLS(ctx, tln) }()
			}
			if sshListen != "" { // sshkey.go
				if err := startSSHGateway(ctx, srv, sshListen, secretsKeyDir(db, home), key, errc, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			if !noAgent {
				unlockAgent, err := cli.LockDir(filepath.Join(home, "agent"), "agent")
				if err != nil {
					return err
				}
				defer unlockAgent()
				// The local agent acts as its node only, with a credential
				// of its own that may vouch for this host's users (its
				// socket), never with the admin's token.
				if agentName == "" {
					if agentName, err = os.Hostname(); err != nil {
						return fmt.Errorf("local agent: name: %w", err)
					}
				}
				nodeToken, err := srv.LocalAgentToken(ctx, agentName)
				if err != nil {
					return err
				}
				a, err := agent.New(agentMon.config(agent.Config{Server: url, Token: nodeToken, Name: agentName, Fleet: agentFleet, DataDir: filepath.Join(home, "agent"), Socket: agentSocket,
					CPUs: agentRes.cpus, Memory: agentRes.memory, GPUs: agentRes.gpus, DeclaredGPUs: agentRes.gpusSet, NoCgroups: agentRes.noCgroups,
					RunAsAgent: agentRunAs.agent, SpoolDir: agentRunAs.spool, Logger: log.With("role", "agent"), Version: cli.Version}))
				if err != nil {
					return err
				}
				go func() { errc <- a.Run(ctx) }()
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Berth server on %s (state %s, client config %s)\n", url, store.Redact(db), cli.ConfigPath())
			select {
			case <-ctx.Done():
			case err = <-errc:
			}
			if rp != nil && err != nil {
				// Deposed, or a commit refused: stop serving at once (the
				// agents' streams too), not after a graceful shutdown.
				log.Error("replica stepping down", "err", err)
				_ = hs.Close()
				return err
			}
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(shut)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:3000", "address to serve the API on")
	f.StringVar(&sshListen, "ssh-listen", "", "address to serve the SSH gateway on (ssh -J to your runs with a key registered by berth ssh-key add; default: none)")
	f.DurationVar(&cloudPause, "cloud-pause-after-record", 0, "tests: wait this long between recording an instance and creating it")
	_ = f.MarkHidden("cloud-pause-after-record")
	f.StringVar(&db, "db", "", "where the state is: a SQLite file (default $BERTH_DB, else $BERTH_HOME/server/berth.db) or a PostgreSQL database, postgres://USER:PASSWORD@HOST:PORT/DB")
	f.StringVar(&sync, "sync", "normal", "SQLite durability: normal (survives any crash of the process) or full (also a power loss); not for PostgreSQL")
	f.BoolVar(&noAgent, "no-local-agent", false, "do not run an agent for this host in the server process")
	f.StringVar(&agentName, "agent-name", "", "node name of the local agent (default: the host name)")
	f.StringVar(&agentFleet, "agent-fleet", "", "fleet (Slurm: partition) of the local agent's node")
	f.DurationVar(&grace, "stop-grace", 10*time.Second, "time between SIGTERM and SIGKILL when a run is stopped")
	f.DurationVar(&nodeTimeout, "node-timeout", time.Minute, "how long a node's agent may stay disconnected before its jobs fail as unreachable (an agent back sooner keeps them)")
	f.DurationVar(&unkillable, "unkillable-timeout", time.Minute, "how long past its grace period a job asked to stop may go on without its agent reporting its end; then the server ends it and drains its node with reason \"Kill task failed\" (Slurm's UnkillableStepTimeout)")
	f.IntVar(&maxArray, "max-array-size", 1_000_001, "array indices must be below this (Slurm's MaxArraySize)")
	f.IntVar(&maxNodes, "max-nodes-per-run", 10_000, "the most nodes one run may ask for, its groups' together (Slurm: a partition's MaxNodes)")
	f.Var(cli.SizeFlag(&maxUpload), "max-upload", "the most one archive of a run's repo or files may hold, e.g. 500MB (default 100MB)")
	f.DurationVar(&blobRetention, "blob-retention", server.DefaultBlobRetention, "how long an uploaded repo or files archive is kept once no run needs it (last used that long ago, named by no run unfinished or finished since); negative: for ever")
	f.Var(cli.SizeFlag(&maxScript), "max-script-size", "the most a run's commands may hold, e.g. 8MB (default 4MB, Slurm's max_script_size)")
	f.StringVar(&policy, "policy", "berth", "scheduling of runs that cannot start now: berth (EASY backfill, shortest runs first), easy (backfill around the first waiting run's reservation), conservative (a reservation for every waiting run) or fcfs")
	f.StringVar(&weights, "priority-weights", "", "multifactor priority weights, e.g. age=1000,fairshare=10000,size=1000,qos=10000,partition=1000,priority=10000,expansion=10000,max-age=168h,favor-small=true (unnamed ones keep their defaults)")
	f.DurationVar(&halfLife, "fairshare-half-life", 7*24*time.Hour, "time after which past usage counts half for fairshare")
	f.StringVar(&policyFile, "policy-file", "", "scheduling rules: QOS, limits, fairshare shares, fleets as partitions, switch topology (default $BERTH_HOME/policy.yml when it exists; see docs/configuration.md)")
	f.IntVar(&depth, "sched-depth", 0, "pending runs a scheduling pass considers, highest priority first (0: all; Slurm's bf_max_job_test)")
	f.DurationVar(&metricsRetention, "metrics-retention", 30*24*time.Hour, "how long jobs' metrics samples are kept (berth metrics after a run ends; past an hour they are kept one a minute)")
	f.BoolVar(&metrics.PerRun, "metrics-per-run", false, "GET /metrics: also each running job's samples, labelled with its run (a series per job; off, they are summed per node)")
	f.StringVar(&metrics.Token, "metrics-token", "", "GET /metrics: a bearer token that may scrape besides admins' tokens (default $BERTH_METRICS_TOKEN); clients on this host need none")
	f.BoolVar(&metrics.Public, "metrics-public", false, "GET /metrics: any client may scrape, with no token")
	f.BoolVar(&autoUsers, "auto-users", true, "make a Berth user of a Unix login at its first request through an agent's local socket (false: an admin makes users)")
	f.StringSliceVar(&allowUsers, "allow-users", nil, "only these Unix logins are made users so (comma-separated; default: any)")
	f.StringToStringVar(&fleetBinaries, "fleet-binary", nil, "a berth binary for SSH fleet hosts of another CPU architecture, ARCH=PATH (Go's names: arm64, amd64; repeatable)")
	f.StringSliceVar(&privateData, "private-data", []string{"logs"}, "what members of a project do not see of each other's runs (Slurm's PrivateData): jobs (others' runs are not found), logs (others' output and metrics are refused), none; the project's admins and managers see all")
	f.StringVar(&gatewayTLSCert, "gateway-tls-cert", "", "PEM certificate (chain) to serve HTTPS with on --gateway-tls-listen: the gateway, the API and the dashboard; services may then say https: true (read again when the file changes)")
	f.StringVar(&gatewayTLSKey, "gateway-tls-key", "", "PEM private key of --gateway-tls-cert")
	f.StringVar(&gatewayTLSListen, "gateway-tls-listen", ":8443", "address to serve HTTPS on, with --gateway-tls-cert")
	f.StringVar(&gatewayDomain, "gateway-domain", "", "services also answer on NAME.PROJECT.DOMAIN and (default project) NAME.DOMAIN, e.g. example.com, https://example.com or example.com:3000 (the scheme and port are what service URLs say; DNS: a wildcard record to this server)")
	f.StringVar(&agentSocket, "socket", cli.SocketPath(), "local agent's socket for this host's users, who need no token there (default $BERTH_SOCKET, else "+api.DefaultSocket+"; none: no socket)")
	agentRes.add(cmd, "local agent's ")
	agentMon.add(cmd, "local agent's ")
	agentRunAs.add(cmd, "local agent's ")
	replicaOpts.add(cmd)
	return cmd
}

// openStore opens the server's store at db (--db): a PostgreSQL database,
// which the store locks for this server, or a SQLite file, whose
// directory lockDir locks. Errors name the flag.
// secretsKeyDir is where the secrets key file is kept: beside a SQLite
// database; for PostgreSQL, in $BERTH_HOME/server (never in the database
// whose secrets it opens).
func secretsKeyDir(db, home string) string {
	if kind, target, err := store.ParseLocation(db); err == nil && kind != store.KindPostgres {
		return filepath.Dir(target)
	}
	return filepath.Join(home, "server")
}

func openStore(ctx context.Context, db, sync string, syncSet, replica bool) (store.Store, func(), error) {
	kind, target, err := store.ParseLocation(db)
	if err != nil {
		return nil, nil, fmt.Errorf("--db: %w", err)
	}
	if replica && kind != store.KindPostgres {
		return nil, nil, errors.New("--replica: replicas share a PostgreSQL database: give --db postgres://…")
	}
	if kind == store.KindPostgres {
		if syncSet {
			return nil, nil, fmt.Errorf("--sync is SQLite's durability; PostgreSQL's commits are durable (its synchronous_commit): drop --sync, or give --db a SQLite file")
		}
		// A replica takes the lock later, as its lease (replica.go).
		st, err := store.OpenPostgres(ctx, target, store.PostgresOptions{Exclusive: !replica, Replica: replica})
		if err != nil {
			return nil, nil, fmt.Errorf("--db %s: %w", store.Redact(db), err)
		}
		return st, func() {}, nil
	}
	unlock, err := cli.LockDir(filepath.Dir(target), "server")
	if err != nil {
		return nil, nil, err
	}
	st, err := store.OpenSQLite(ctx, target, store.SQLiteOptions{Sync: sync})
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return st, unlock, nil
}

// metricsOptions completes the --metrics-* flags: the token from the
// environment when not given (a flag shows in ps), the version.
func metricsOptions(o server.MetricsOptions) server.MetricsOptions {
	if o.Token == "" {
		o.Token = os.Getenv("BERTH_METRICS_TOKEN")
	}
	o.Version = cli.Version
	return o
}

// loadRules reads the policy file: the one named, or $BERTH_HOME/policy.yml
// when it exists, or none.
func loadRules(path, home string) (*rules.Policy, error) {
	if path == "" {
		path = filepath.Join(home, "policy.yml")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return rules.Empty(), nil
		}
	}
	return rules.Load(path)
}

// parseWeights reads --priority-weights over sched.DefaultWeights.
func parseWeights(s string) (*sched.Weights, error) {
	w := sched.DefaultWeights
	if strings.TrimSpace(s) == "" {
		return &w, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("--priority-weights: %q is not NAME=VALUE", kv)
		}
		var err error
		switch k {
		case "max-age":
			w.MaxAge, err = time.ParseDuration(v)
		case "favor-small":
			w.FavorSmall, err = strconv.ParseBool(v)
		default:
			dst := map[string]*int64{"age": &w.Age, "fairshare": &w.Fairshare, "size": &w.Size, "qos": &w.QOS, "partition": &w.Partition, "priority": &w.Priority, "expansion": &w.Expansion}[k]
			if dst == nil {
				return nil, fmt.Errorf("--priority-weights: unknown weight %q (age, fairshare, size, qos, partition, priority, expansion, max-age, favor-small)", k)
			}
			*dst, err = strconv.ParseInt(v, 10, 64)
			if err == nil && *dst < 0 {
				err = fmt.Errorf("negative")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("--priority-weights: %s: %v", k, err)
		}
	}
	return &w, nil
}

// adminToken returns the client config's token when the server knows it, else
// makes a new admin token; either way it (re)writes the client config.
func adminToken(ctx context.Context, srv *server.Server, url string) (string, error) {
	path := cli.ConfigPath()
	c, err := cli.ReadClientConfig(path)
	if err == nil && c.Token != "" && srv.ValidToken(ctx, c.Token) {
		if err := srv.EnsureAdmin(ctx, ""); err != nil {
			return "", err
		}
	} else {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		c.Token = hex.EncodeToString(b)
		if err := srv.EnsureAdmin(ctx, c.Token); err != nil {
			return "", err
		}
	}
	// A list of replicas' URLs that names this server stays (replica.go).
	if !slices.Contains(client.SplitURLs(c.URL), url) || !strings.Contains(c.URL, ",") {
		c.URL = url
	}
	if err := cli.WriteClientConfig(path, c); err != nil {
		return "", fmt.Errorf("write client config: %w", err)
	}
	return c.Token, nil
}

// resourceFlags declare a node's resources instead of detecting them.
type resourceFlags struct {
	cpus    int
	memory  int64
	gpus    []api.GPU
	gpusSet bool
	mem     string
	gpu     string
	// noCgroups: jobs run without limits (agent.Config.NoCgroups).
	noCgroups bool
}

func (r *resourceFlags) add(cmd *cobra.Command, prefix string) {
	f := cmd.Flags()
	f.IntVar(&r.cpus, "cpus", 0, prefix+"CPUs to offer (default: detected)")
	f.StringVar(&r.mem, "memory", "", prefix+"memory to offer, e.g. 64GB (default: detected)")
	f.StringVar(&r.gpu, "gpus", "", prefix+"GPUs to offer instead of detecting them, like gres.conf: 4, A100:80GB:4, A100:80GB:4,T4:16GB:2")
	f.BoolVar(&r.noCgroups, "no-cgroups", false, prefix+"jobs run without cgroups: memory and CPU limits are not enforced (berth fleet shows it)")
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(c, args); err != nil {
				return err
			}
		}
		if r.mem != "" {
			b, err := spec.ParseBytes(r.mem)
			if err != nil {
				return fmt.Errorf("--memory: %w", err)
			}
			r.memory = int64(b)
		}
		if c.Flags().Changed("gpus") {
			g, err := agent.ParseGPUs(r.gpu, func(s string) (int64, error) {
				b, err := spec.ParseBytes(s)
				return int64(b), err
			})
			if err != nil {
				return err
			}
			r.gpus, r.gpusSet = g, true
		}
		return nil
	}
}

func newAgentCmd() *cobra.Command {
	var (
		serverURL, name, dataDir, addr, fleet, socket string
		res                                           resourceFlags
		mon                                           monitorFlags
		runAs                                         runAsFlags
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the compute plane on this host and join a server's cluster",
		Long: `Run the compute plane: detect this host's CPUs, memory and GPUs (or take --cpus, --memory,
--gpus), register with the server, and run the jobs it assigns. The token, a node's credential
(berth node token create NODE), comes from BERTH_TOKEN or the client configuration file. Jobs keep running if the agent stops; a restarted agent with the
same --data-dir finds them again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			conn, err := cli.ReadClientConfig(cli.ConfigPath())
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if v := os.Getenv("BERTH_TOKEN"); v != "" {
				conn.Token = v
			}
			// Nothing the agent starts (shims, health checks, jobs)
			// inherits its credential.
			_ = os.Unsetenv("BERTH_TOKEN")
			if serverURL == "" {
				serverURL = os.Getenv("BERTH_URL")
			}
			if serverURL == "" {
				serverURL = conn.URL
			}
			if serverURL == "" || conn.Token == "" {
				return errors.New("agent: --server (or BERTH_URL) and a token (BERTH_TOKEN or the config file) are required")
			}
			if dataDir == "" {
				dataDir = filepath.Join(cli.Home(), "agent")
			}
			unlock, err := cli.LockDir(dataDir, "agent")
			if err != nil {
				return err
			}
			defer unlock()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if err := checkBlocks(mon.blocks); err != nil {
				return &cli.ExitError{Code: 2, Err: err}
			}
			a, err := agent.New(mon.config(agent.Config{Server: serverURL, Token: conn.Token, Name: name, DataDir: dataDir, Addr: addr, Fleet: fleet, Socket: socket,
				CPUs: res.cpus, Memory: res.memory, GPUs: res.gpus, DeclaredGPUs: res.gpusSet, NoCgroups: res.noCgroups,
				RunAsAgent: runAs.agent, SpoolDir: runAs.spool, Logger: log, Version: cli.Version}))
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&serverURL, "server", "", "the server's URL (default BERTH_URL, else the config file's)")
	f.StringVar(&name, "name", "", "this node's name (default: the host name)")
	f.StringVar(&dataDir, "data-dir", "", "where the agent keeps its jobs' files (default $BERTH_HOME/agent)")
	f.StringVar(&addr, "addr", "", "address other nodes reach this one at (default: the address of the route to the server)")
	f.StringVar(&fleet, "fleet", "", "the fleet (Slurm: partition) this node belongs to; runs that name fleets go only to their nodes")
	f.StringVar(&socket, "socket", cli.SocketPath(), "socket for this host's users, who need no token there (default $BERTH_SOCKET, else "+api.DefaultSocket+"; none: no socket); the token must be a node's made with --assert-users")
	res.add(cmd, "")
	mon.add(cmd, "")
	runAs.add(cmd, "")
	return cmd
}

// runAsFlags say how an agent runs jobs it cannot run as their user.
type runAsFlags struct {
	agent bool
	spool string
}

func (r *runAsFlags) add(cmd *cobra.Command, prefix string) {
	f := cmd.Flags()
	f.BoolVar(&r.agent, "run-as-agent", false, prefix+"jobs it cannot run as their user (it is not root, or the user has no account on this host) run as its own user instead of failing to start")
	f.StringVar(&r.spool, "spool-dir", "", prefix+"directory of the job directories of users' jobs, which those users must be able to reach (default /var/spool/berth; only as root)")
}

func newShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "shim DIR",
		Short:  "Supervise one job (started by the agent)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := agent.RunShim(args[0]); code != 0 {
				return &cli.ExitError{Code: code}
			}
			return nil
		},
	}
}

// parsePrivateData reads --private-data: jobs, logs, none.
func parsePrivateData(vals []string) (server.PrivateData, error) {
	var p server.PrivateData
	for _, v := range vals {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "jobs":
			p.Jobs = true
		case "logs":
			p.Logs = true
		case "none", "":
		default:
			return p, fmt.Errorf("--private-data %q: want jobs, logs or none (comma-separated)", v)
		}
	}
	return p, nil
}
