package control

import (
	"errors"
	"log/slog"
	"time"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
)

// Errors an input is refused with; the server maps them to status codes.
// Their words are the API's (clients match the first).
var (
	ErrInvalid   = errors.New("server: invalid request")
	ErrNotFound  = errors.New("server: not found")
	ErrForbidden = errors.New("server: forbidden")
	ErrConflict  = errors.New("server: conflict")
)

// Config is what the cluster's rules depend on.
type Config struct {
	Logger *slog.Logger
	// StopGrace is the time between SIGTERM and SIGKILL when a run is stopped.
	StopGrace time.Duration
	// Policy is how the scheduler treats runs that cannot start now.
	Policy sched.Policy
	// Weights of the multifactor priority.
	Weights *sched.Weights
	// HalfLife decays past usage for fairshare.
	HalfLife time.Duration
	// Depth bounds the pending runs a pass considers (0: all).
	Depth int
	// Drift is how long passes may stay incremental while the clock moves
	// (sched.CycleConfig.Drift): the server's resync period. 0: a pass at
	// a new instant considers every waiting run.
	Drift time.Duration
	// Rules are the policy in force at start.
	Rules *policy.Policy
	// NodeTimeout is how long a node's agent may stay disconnected before
	// its jobs are failed as unreachable.
	NodeTimeout time.Duration
	// UnkillableTimeout is how long past its grace period a job asked to
	// stop may go on without its agent reporting its end (Slurm's
	// UnkillableStepTimeout): then the server ends it and drains its node
	// ("Kill task failed").
	UnkillableTimeout time.Duration
	// MaxArraySize bounds array indices, as Slurm's MaxArraySize.
	MaxArraySize int
}

// New makes an empty cluster (Restore fills it from the store); a zero
// field of cfg takes its default, as the server's.
func New(cfg Config) *Cluster {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Rules == nil {
		cfg.Rules = policy.Empty()
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.HalfLife == 0 {
		cfg.HalfLife = 7 * 24 * time.Hour
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = time.Minute
	}
	if cfg.UnkillableTimeout == 0 {
		cfg.UnkillableTimeout = time.Minute
	}
	if cfg.MaxArraySize == 0 {
		cfg.MaxArraySize = 1_000_001
	}
	if cfg.Weights == nil {
		w := sched.DefaultWeights
		cfg.Weights = &w
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger,
		runs: map[int64]*runState{}, jobs: map[int64]*jobState{}, pending: map[int64]*runState{}, fresh: map[int64]*runState{}, reasons: map[int64]*runState{}, maybeHeld: map[int64]*runState{},
		active: map[sched.LimitKey]int{}, waiters: map[int64][]int64{}, ended: map[int64]Outcome{}, arrays: map[int64]*runState{}, schedules: map[int64]*runState{}, doneArrays: map[int64]*arrayState{},
		nodes: map[string]*nodeState{},
	}
	c.rules.Store(cfg.Rules)
	c.cycle = sched.NewCycle(c.cycleConfig(cfg.Rules))
	return c
}
