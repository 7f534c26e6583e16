package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/control"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
	"github.com/berth-hq/berth/internal/web"
)

// Clock tells the time; tests give a fake one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC() }

// Errors the API maps to status codes.
var (
	ErrUnavailable  = errors.New("server: unavailable")
	ErrNotFound     = control.ErrNotFound
	ErrInvalid      = control.ErrInvalid
	ErrUnauthorized = errors.New("server: unauthorized")
	ErrForbidden    = control.ErrForbidden
	ErrConflict     = control.ErrConflict
)

// Config is what a server needs.
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	Clock  Clock
	// StopGrace is the time between SIGTERM and SIGKILL when a run is stopped.
	StopGrace time.Duration
	// DashboardPoll is how often the dashboard's live views would be read
	// again without the server's change hook (web.Options.Poll; tests set
	// it long to prove the views follow changes).
	DashboardPoll time.Duration
	// ResyncEvery is the scheduler's safety-net timer; changes wake it at once.
	ResyncEvery time.Duration
	// PingEvery is how often agent streams carry a keep-alive.
	PingEvery time.Duration
	// Policy is how the scheduler treats runs that cannot start now
	// (zero: EASY backfill).
	Policy sched.Policy
	// Weights of the multifactor priority (nil: sched.DefaultWeights).
	Weights *sched.Weights
	// HalfLife decays past usage for fairshare (default 7 days).
	HalfLife time.Duration
	// Depth bounds the pending runs a pass considers (0: all).
	Depth int
	// Rules are the policy file's QOS, limits, shares, fleets and topology
	// at start (nil: none, one implicit QOS).
	Rules *policy.Policy
	// PolicyFile is where Rules come from: ReloadPolicy and the policy
	// file API read and write it (empty: the rules cannot change).
	PolicyFile string
	// NodeTimeout is how long a node's agent may stay disconnected before
	// its jobs are failed as unreachable (default 60 s).
	NodeTimeout time.Duration
	// MetricsRaw is how long jobs' metrics samples are kept as they came
	// before they are folded into one a minute (0: an hour);
	// MetricsRetention how long they are kept at all (0: 30 days).
	MetricsRaw, MetricsRetention time.Duration
	// UnkillableTimeout is how long past its grace period a stopped job
	// may go on unreported before the server ends it and drains its node
	// (0: a minute; see control.Config).
	UnkillableTimeout time.Duration
	// MaxArraySize bounds array indices, as Slurm's MaxArraySize: indices
	// 0..MaxArraySize-1 (default 1,000,001).
	MaxArraySize int
	// ListPage is how many runs a listing reads and sends at a time
	// (default 1,000): listings stream, a page in memory at once.
	ListPage int
	// MaxScriptBytes bounds a run's commands, as Slurm's max_script_size
	// (default spec.DefaultScriptBytes, 4 MB).
	MaxScriptBytes int64
	// MaxUploadBytes bounds one archive of a run's repo or files (berth
	// server --max-upload; default DefaultMaxUpload).
	MaxUploadBytes int64
	// BlobRetention is how long an uploaded archive stays once no run
	// needs it: last used this long ago, and named by no run unfinished or
	// finished within it (berth server --blob-retention; default
	// DefaultBlobRetention; negative: kept for ever).
	BlobRetention time.Duration
	// MaxNodesPerRun bounds the nodes (jobs) one run may ask for, every
	// group of a heterogeneous run together (default 10,000).
	MaxNodesPerRun int
	// Metrics are what GET /metrics serves (NewMetrics; nil: no /metrics).
	Metrics *Metrics
	// NoAutoUsers: a Unix login a node vouches for is not made a Berth
	// user by its first request (an administrator makes users).
	NoAutoUsers bool
	// AllowUsers, when set, are the only Unix logins made users so.
	AllowUsers []string
	// FleetBinaries are berth binaries for SSH fleets' hosts of other CPU
	// architectures than the server's, by Go's name (arm64 → path).
	FleetBinaries map[string]string
	// SecretsKey seals the projects' secrets (AES-256-GCM, 32 bytes;
	// LoadSecretsKey): never kept in the database. Nil: secrets are off
	// (berth server always gives one). SecretsKeySource says where it
	// came from, for messages.
	SecretsKey       []byte
	SecretsKeySource string
	// Providers lend backend fleets' nodes (cloud.go; none: no backend
	// fleets); CloudEvery is how often the autoscaler looks (default 2 s).
	Providers  []provider.Provider
	CloudEvery time.Duration
	// CloudPauseAfterRecord makes each instance's creation wait this long
	// between its record and the provider's call (tests kill the server
	// there: berth server --cloud-pause-after-record, hidden).
	CloudPauseAfterRecord time.Duration
	// GatewayDomain: services answer on NAME.PROJECT.DOMAIN and, in the
	// default project, NAME.DOMAIN ([SCHEME://]DOMAIN[:PORT];
	// gateway_domain.go; empty: on /proxy/services/ only).
	GatewayDomain string
	// GatewayTLSCert and GatewayTLSKey: the certificate and key files
	// ServeTLS serves HTTPS with (gateway_tls.go); with them a service
	// may say `https: true`.
	GatewayTLSCert, GatewayTLSKey string
	// PrivateData is what members do not see of each other's runs in
	// their projects (Slurm's PrivateData; projects.go). The zero value
	// hides nothing; berth server's default (--private-data logs) hides
	// others' output.
	PrivateData PrivateData
}

// Server is the control plane. New loads its state; Run runs its loops;
// Handler serves its API.
type Server struct {
	cfg   Config
	store store.Store
	log   *slog.Logger
	clock Clock
	// changes wakes the dashboard's live views when the cluster changed.
	changes changes
	// signIn holds the dashboard's one-time sign-in codes (signin.go).
	signIn signInCodes
	// fileMu serialises the policy file's readers and writers; it is taken
	// before mu, never while holding it.
	fileMu sync.Mutex

	// mu guards the cluster (the control plane's state, internal/control)
	// and conns. Functions run after a commit never take it (commit.go).
	mu sync.Mutex
	*control.Cluster
	broken error
	// full is set while the store cannot be written for want of room (or
	// is read-only): changes are refused with it (503) while the
	// committer retries the batch that failed (commit.go).
	full error

	// conns are the nodes' open agent streams; connMu guards them (taken
	// under mu, or alone when an effect is performed).
	connMu sync.Mutex
	conns  map[string]nodeConn

	commits chan *commitReq
	wake    chan struct{}
	fatal   chan error
	hub     *hub

	// projectID is the default project's (projects.go).
	projectID int64
	// roles are users' memberships by user ID (cachedRoles, for tokenTTL).
	roles  sync.Map
	names  sync.Map // "u<id>" / "p<id>" -> name
	tokens sync.Map // token hash -> cachedCred
	// assertedUsers are the users nodes vouched for, by name (cachedCred,
	// for tokenTTL); legacyAgents the admin tokens seen acting as agents.
	assertedUsers sync.Map
	legacyAgents  sync.Map
	// jobKey signs the runs' job credentials (identity.go).
	jobKey []byte
	// secrets are the projects' secrets, sealed and opened (secrets.go).
	secrets  secretBox
	tokenTTL atomic.Int64 // nanoseconds; tests shorten it
	metrics  struct{ commits, batches, cycles atomic.Int64 }
	jm       metricsStore // jobs' samples (metrics.go)
	// steps relays srun's steps to the step hosts (steps.go); its own lock.
	steps stepRelay
	// tunnels are the tunnels waiting for their agent's end (tunnel.go).
	tunnels tunnelWaits
	// svc, gwOnce and gwTransport are the services and their gateway
	// (services.go, gateway.go).
	svc         services
	gwOnce      sync.Once
	gwTransport *http.Transport
	// util watches the runs' utilization_policy (utilization.go).
	util         utilWatch
	cloud        cloudState   // backend fleets (cloud.go)
	stepPollWait atomic.Int64 // nanoseconds; tests shorten the step polls
	// fleets run the SSH fleets' installations (fleets.go).
	fleets fleetWorkers
	vols   volumeState // network volumes (volumes.go)
}

// New opens the server's state from the store. The "main" project and the
// admin user exist from the start, so every run has an owner.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.ResyncEvery == 0 {
		cfg.ResyncEvery = 30 * time.Second
	}
	if cfg.PingEvery == 0 {
		cfg.PingEvery = 10 * time.Second
	}
	if cfg.Weights == nil {
		w := sched.DefaultWeights
		cfg.Weights = &w
	}
	if cfg.HalfLife == 0 {
		cfg.HalfLife = 7 * 24 * time.Hour
	}
	if cfg.Rules == nil {
		cfg.Rules = policy.Empty()
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = time.Minute
	}
	if cfg.MetricsRaw <= 0 {
		cfg.MetricsRaw = time.Hour
	}
	if cfg.MetricsRetention <= 0 {
		cfg.MetricsRetention = 30 * 24 * time.Hour
	}
	if cfg.ListPage <= 0 {
		cfg.ListPage = 1000
	}
	if cfg.MaxNodesPerRun <= 0 {
		cfg.MaxNodesPerRun = 10_000
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUpload
	}
	if cfg.BlobRetention == 0 {
		cfg.BlobRetention = DefaultBlobRetention
	}
	if cfg.MaxScriptBytes <= 0 {
		cfg.MaxScriptBytes = spec.DefaultScriptBytes
	}
	if cfg.MaxArraySize == 0 {
		cfg.MaxArraySize = 1_000_001
	}
	s := &Server{
		cfg: cfg, store: cfg.Store, log: cfg.Logger, clock: cfg.Clock,
		commits: make(chan *commitReq, 8192),
		wake:    make(chan struct{}, 1),
		fatal:   make(chan error, 1),
		hub:     newHub(),
		conns:   map[string]nodeConn{},
	}
	s.tokenTTL.Store(int64(tokenCache))
	s.Cluster = control.New(control.Config{Logger: cfg.Logger, StopGrace: cfg.StopGrace, Policy: cfg.Policy, Weights: cfg.Weights,
		HalfLife: cfg.HalfLife, Depth: cfg.Depth, Drift: cfg.ResyncEvery, Rules: cfg.Rules, NodeTimeout: cfg.NodeTimeout,
		UnkillableTimeout: cfg.UnkillableTimeout, MaxArraySize: cfg.MaxArraySize})
	var err error
	if s.projectID, err = s.store.EnsureProject(ctx, DefaultProject); err != nil {
		return nil, err
	}
	s.syncPolicyProjects(ctx, cfg.Rules)
	if err := s.loadJobKey(ctx); err != nil {
		return nil, err
	}
	if err := s.openSecrets(ctx); err != nil {
		return nil, err
	}
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	if err := s.loadSteps(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// EnsureAdmin creates the admin user when missing and, when token is not
// empty, registers it as one of the admin's tokens.
func (s *Server) EnsureAdmin(ctx context.Context, token string) error {
	uid, err := s.store.EnsureUser(ctx, "admin", true)
	if err != nil {
		return err
	}
	if token == "" {
		return nil
	}
	return s.store.AddToken(ctx, uid, HashToken(token), "admin")
}

// ValidToken reports whether token belongs to a user (and has not expired).
func (s *Server) ValidToken(ctx context.Context, token string) bool {
	_, err := s.user(ctx, token)
	return err == nil
}

// HashToken is how tokens are stored: SHA-256, hex.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Run runs the committer and the scheduler until ctx is done or a commit
// fails (then it returns the error: the process must restart).
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.committer(ctx) }()
	s.syncFleetOwners(ctx) // fleet_owners.go: before the first pass
	go s.schedLoop(ctx)
	go s.reapSteps(ctx)
	go s.foldLoop(ctx)
	go s.serviceLoop(ctx)
	go s.cloudLoop(ctx)
	go s.fleetLoop(ctx)
	go s.blobLoop(ctx) // blobs_prune.go
	go s.volumeLoop(ctx)
	s.wakeScheduler()
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.fatal:
		return err
	}
}

func (s *Server) wakeScheduler() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	v := api.Version
	mux.HandleFunc("POST "+v+"/runs", s.auth(s.handleSubmit))
	mux.HandleFunc("POST "+v+"/plan", s.auth(s.handlePlan))
	mux.HandleFunc("GET "+v+"/runs", s.auth(s.handleListRuns))
	mux.HandleFunc("GET "+v+"/runs/{ref}", s.runAuth(s.handleGetRun))
	mux.HandleFunc("POST "+v+"/runs/{ref}/stop", s.auth(s.handleStop))
	mux.HandleFunc("POST "+v+"/runs/{ref}/control", s.auth(s.handleControl))
	mux.HandleFunc("POST "+v+"/runs/{ref}/signal", s.auth(s.handleSignal))
	mux.HandleFunc("GET "+v+"/runs/{ref}/logs", s.runAuth(s.handleLogs))
	mux.HandleFunc("GET "+v+"/nodes", s.auth(s.handleNodes))
	mux.HandleFunc("POST "+v+"/offers", s.auth(s.handleOffers))      // cloud_api.go
	mux.HandleFunc("GET "+v+"/instances", s.auth(s.handleInstances)) // cloud_api.go
	mux.HandleFunc("GET "+v+"/runs/{ref}/metrics", s.auth(s.handleRunMetrics))
	mux.HandleFunc("POST "+v+"/nodes/{name}/drain", s.auth(s.handleDrain))
	mux.HandleFunc("POST "+v+"/nodes/{name}/resume", s.auth(s.handleResume))
	mux.HandleFunc("DELETE "+v+"/nodes/{name}", s.auth(s.handleNodeDelete)) // nodes_remove.go
	mux.HandleFunc("POST "+v+"/nodes/{name}/tokens", s.auth(s.handleNodeTokenCreate))
	mux.HandleFunc("GET "+v+"/server", s.auth(s.handleStatus))
	mux.HandleFunc("GET "+v+"/priorities", s.auth(s.handlePriorities))
	mux.HandleFunc("GET "+v+"/policy", s.auth(s.handlePolicy))
	mux.HandleFunc("GET "+v+"/usage", s.auth(s.handleUsage))
	mux.HandleFunc("GET "+v+"/fairshare", s.auth(s.handleFairshare))
	mux.HandleFunc("POST "+v+"/policy/reload", s.auth(s.handlePolicyReload))
	mux.HandleFunc("GET "+v+"/policy/file", s.auth(s.handlePolicyFile))
	mux.HandleFunc("PUT "+v+"/policy/file", s.auth(s.handlePolicyWrite))
	mux.HandleFunc("POST "+v+"/users", s.auth(s.handleUserCreate))
	mux.HandleFunc("GET "+v+"/users", s.auth(s.handleUserList))
	mux.HandleFunc("DELETE "+v+"/users/{name}", s.auth(s.handleUserDelete))
	mux.HandleFunc("POST "+v+"/tokens", s.auth(s.handleTokenCreate))
	mux.HandleFunc("GET "+v+"/tokens", s.auth(s.handleTokenList))
	mux.HandleFunc("DELETE "+v+"/tokens/{id}", s.auth(s.handleTokenRevoke))
	mux.HandleFunc("GET "+v+"/whoami", s.handleWhoAmI)
	mux.HandleFunc("POST "+v+"/signin-codes", s.auth(s.handleSignInCode))
	mux.HandleFunc("POST "+v+"/signin-codes/redeem", s.handleSignInRedeem)
	mux.HandleFunc("GET "+v+"/secrets", s.auth(s.handleSecretList))
	mux.HandleFunc("PUT "+v+"/secrets/{name}", s.auth(s.handleSecretSet))
	mux.HandleFunc("GET "+v+"/secrets/{name}", s.auth(s.handleSecretGet))
	mux.HandleFunc("DELETE "+v+"/secrets/{name}", s.auth(s.handleSecretDelete))
	// Projects and their members (projects_api.go).
	s.fleetRoutes(mux, v)
	s.volumeRoutes(mux, v)
	mux.HandleFunc("POST "+v+"/projects", s.auth(s.handleProjectCreate))
	mux.HandleFunc("GET "+v+"/projects", s.auth(s.handleProjectList))
	mux.HandleFunc("DELETE "+v+"/projects/{name}", s.auth(s.handleProjectDelete))
	mux.HandleFunc("GET "+v+"/projects/{name}/members", s.auth(s.handleMemberList))
	mux.HandleFunc("PUT "+v+"/projects/{name}/members/{user}", s.auth(s.handleMemberSet))
	mux.HandleFunc("DELETE "+v+"/projects/{name}/members/{user}", s.auth(s.handleMemberRemove))
	// The agents' endpoints take a node's credential, which acts as its
	// node only (identity.go).
	mux.HandleFunc("POST "+v+"/agent/register", s.agentAuth(s.handleRegister))
	mux.HandleFunc("GET "+v+"/agent/stream", s.agentAuth(s.handleStream))
	mux.HandleFunc("POST "+v+"/agent/events", s.agentAuth(s.handleEvents))
	mux.HandleFunc("POST "+v+"/agent/metrics", s.agentAuth(s.handleAgentMetrics))
	mux.HandleFunc("POST "+v+"/agent/health", s.agentAuth(s.handleAgentHealth))
	// A run's steps: its owner (or an admin), or its jobs' own credential
	// (srun inside the allocation, the step hosts).
	mux.HandleFunc("POST "+v+"/runs/{ref}/steps", s.runAuth(s.handleStepCreate))
	mux.HandleFunc("GET "+v+"/runs/{ref}/steps/next", s.runAuth(s.handleStepNext))
	mux.HandleFunc("GET "+v+"/runs/{ref}/steps/{id}", s.runAuth(s.handleStepStatus))
	mux.HandleFunc("POST "+v+"/runs/{ref}/steps/{id}/output", s.runAuth(s.handleStepOutput))
	mux.HandleFunc("POST "+v+"/runs/{ref}/steps/{id}/exit", s.runAuth(s.handleStepExit))
	mux.HandleFunc("POST "+v+"/runs/{ref}/steps/{id}/signal", s.runAuth(s.handleStepSignal))
	mux.HandleFunc("POST "+v+"/runs/{ref}/steps/{id}/alive", s.runAuth(s.handleStepAlive))
	mux.HandleFunc("POST "+v+"/runs/{ref}/steps/{id}/cancel", s.runAuth(s.handleStepCancel))
	mux.HandleFunc("GET "+v+"/runs/{ref}/steps/{id}/attach", s.runAuth(s.handleStepAttach))
	mux.HandleFunc("GET "+v+"/steps", s.auth(s.handleListSteps))
	mux.HandleFunc("GET "+v+"/runs/{ref}/tunnel", s.runAuth(s.handleRunTunnel))
	mux.HandleFunc("GET "+v+"/agent/tunnel/{id}", s.agentAuth(s.handleAgentTunnel))
	s.sshKeyRoutes(mux, v) // sshgate.go
	mux.HandleFunc("/proxy/services/{project}/{name}/", s.handleGateway)
	mux.HandleFunc("/proxy/models/{project}/{rest...}", s.handleModels)
	mux.HandleFunc("GET "+v+"/blobs/{digest}", s.auth(s.handleBlobHas))
	mux.HandleFunc("PUT "+v+"/blobs/{digest}", s.auth(s.handleBlobPut))
	mux.HandleFunc("GET "+v+"/runs/{ref}/blobs/{digest}", s.runAuth(s.handleRunBlob))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", s.metricsHandler())
	// The dashboard (internal/web) at / and /ui/, over this same API.
	ui := web.New(mux, web.Options{Logger: s.log, Changed: s.changes.Next, Poll: s.cfg.DashboardPoll})
	mux.Handle("GET /{$}", ui)
	mux.Handle("/ui/", ui)
	return s.cfg.Metrics.instrument(s.hostRoute(mux)) // gateway_domain.go
}

// user resolves a user's token (a node's is refused).
func (s *Server) user(ctx context.Context, token string) (*store.User, error) {
	_, u, err := s.lookup(ctx, token)
	if err == nil && u == nil {
		err = fmt.Errorf("%w: a node's token", ErrForbidden)
	}
	return u, err
}

// tokenCache is how long a token's user is remembered (Server.tokenTTL):
// a token deleted from the store stops working within this time, not at
// the next restart.
const tokenCache = 10 * time.Second

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrUnauthorized):
		status = http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		status = http.StatusForbidden
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrNotFound), errors.Is(err, store.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, ErrUnavailable):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "5")
	}
	e := api.Error{Error: publicMessage(err.Error())}
	var fe *spec.Error
	if errors.As(err, &fe) {
		e.Field = fe.Field
	}
	writeJSON(w, status, e)
}

func decode(r *http.Request, v any) error {
	return decodeLimit(r, v, maxBody)
}

// maxBody bounds a request body but a submission's (readSubmit).
const maxBody = 16 << 20

// decodeLimit reads one JSON value of at most limit bytes into v: unknown
// fields and anything after the value are refused, as the YAML path
// refuses them.
func decodeLimit(r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: request body: unexpected data after the JSON value", ErrInvalid)
	}
	return nil
}

// name resolves a user's or project's name, cached.
func (s *Server) name(ctx context.Context, kind byte, id int64) string {
	key := fmt.Sprintf("%c%d", kind, id)
	if v, ok := s.names.Load(key); ok {
		return v.(string)
	}
	var n string
	var err error
	if kind == 'u' {
		n, err = s.store.UserName(ctx, id)
	} else {
		n, err = s.store.ProjectName(ctx, id)
	}
	if err != nil {
		return fmt.Sprint(id)
	}
	s.names.Store(key, n)
	return n
}
