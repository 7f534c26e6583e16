package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when a looked-up record does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrExists is returned when a record to create exists already.
var ErrExists = errors.New("store: already exists")

// Store is Berth's persistence. Implementations must be safe for concurrent use.
type Store interface {
	// Apply commits every change in b in one transaction, in the order given.
	Apply(ctx context.Context, b *Batch) error
	// LoadActive returns what the leader needs in memory at start: every
	// non-final run and its jobs, every node, and the highest IDs used.
	LoadActive(ctx context.Context) (*Active, error)

	GetRun(ctx context.Context, id int64) (*Run, error)
	// KeysSince lists the idempotency keys made at or after since.
	KeysSince(ctx context.Context, since time.Time) ([]*IdempotencyKey, error)
	// FindRun returns the newest run of the project with that name.
	FindRun(ctx context.Context, projectID int64, name string) (*Run, error)
	// FindActiveRun returns the project's active run with that name (a
	// schedule before the runs it fired; else the newest), or ErrNotFound.
	FindActiveRun(ctx context.Context, projectID int64, name string) (*Run, error)
	ListRuns(ctx context.Context, f RunFilter) ([]*Run, error)
	ListJobs(ctx context.Context, runID int64) ([]*Job, error)
	// ListSteps returns the job steps of the runs, by run and step ID.
	ListSteps(ctx context.Context, runIDs []int64) ([]*Step, error)
	// ListJobsOf lists the jobs of many runs at once, by run, number and
	// attempt: one query where ListJobs per run would be one per run.
	ListJobsOf(ctx context.Context, runIDs []int64) ([]*Job, error)
	ListNodes(ctx context.Context) ([]*Node, error)
	// ReadLogs returns the job's log chunks at or after offset, in order, at most limit.
	ReadLogs(ctx context.Context, jobID int64, offset int64, limit int) ([]*LogChunk, error)
	ListEvents(ctx context.Context, runID int64) ([]*Event, error)
	// ListSamples lists the jobs' metrics samples, by job then time (both
	// levels, level 1 first where they overlap), at most limit per job's
	// newest (limit <= 0: all). SamplesBefore lists level's samples taken
	// before t, oldest first, at most limit: what the server folds.
	ListSamples(ctx context.Context, jobIDs []int64, limit int) ([]*MetricSample, error)
	SamplesBefore(ctx context.Context, level int, t time.Time, limit int) ([]*MetricSample, error)
	// UsageSince lists the jobs that ended at or after since, with their
	// run's user: the history fairshare is computed from.
	UsageSince(ctx context.Context, since time.Time) ([]*JobUsage, error)
	// UsageBetween lists the jobs that ended after since and started
	// before until: accounting over a window (sreport, berth usage).
	UsageBetween(ctx context.Context, since, until time.Time) ([]*JobUsage, error)

	// EnsureProject and EnsureUser create the record when missing and return its ID.
	// A user made (here or by CreateUser) is a member of the default
	// project (DefaultProject), as a user, when that project exists.
	EnsureProject(ctx context.Context, name string) (int64, error)
	EnsureUser(ctx context.Context, name string, admin bool) (int64, error)
	AddToken(ctx context.Context, userID int64, hash string, name string) error
	// UserByToken resolves the SHA-256 hex of a user's bearer token (a
	// deleted user's: ErrNotFound; expiry is the caller's to check:
	// TokenByHash gives it).
	UserByToken(ctx context.Context, hash string) (*User, error)

	// CreateUser makes a user, or makes a deleted one live again with
	// admin as given (a member of the default project, as EnsureUser
	// says); a live user of that name is ErrExists.
	CreateUser(ctx context.Context, name string, admin bool) (*User, error)
	// UserByName returns a user, deleted or not (User.Deleted).
	UserByName(ctx context.Context, name string) (*User, error)
	// ListUsers lists the live users by name.
	ListUsers(ctx context.Context) ([]*User, error)
	// DeleteUser marks a user deleted and removes its tokens; its row
	// stays, for its runs.
	DeleteUser(ctx context.Context, name string) error
	// CreateToken stores a token (t.Hash, never the secret): a user's
	// (UserID set) or a node's (Node set). t.ID must be unique.
	CreateToken(ctx context.Context, t *Token) error
	// ListTokens lists the tokens of a user by creation, or with userID 0
	// every token, nodes' too. Hashes are left out.
	ListTokens(ctx context.Context, userID int64) ([]*Token, error)
	// RevokeToken removes a token by ID and returns it (with its hash).
	RevokeToken(ctx context.Context, id string) (*Token, error)
	// TokenByHash resolves a bearer token's SHA-256 hex: the token and,
	// for a user's, its user (nil for a node's). A deleted user's tokens
	// are ErrNotFound; expiry is the caller's to check.
	TokenByHash(ctx context.Context, hash string) (*Token, *User, error)
	// EnsureKey returns the server key of that name, storing value first
	// when there is none: every replica gets the first one stored.
	EnsureKey(ctx context.Context, name, value string) (string, error)

	// PutSecret creates a project's secret or replaces its value and
	// SetBy. Value is the ciphertext: the store never sees a secret's
	// value (the server seals it under a key kept outside the database).
	PutSecret(ctx context.Context, x *Secret) error
	// GetSecret returns a project's secret (ErrNotFound: none).
	GetSecret(ctx context.Context, projectID int64, name string) (*Secret, error)
	// ListSecrets lists a project's secrets by name, or with projectID 0
	// every project's (by project, then name).
	ListSecrets(ctx context.Context, projectID int64) ([]*Secret, error)
	// DeleteSecret removes a project's secret (ErrNotFound: none).
	DeleteSecret(ctx context.Context, projectID int64, name string) error
	// PutService creates a service or replaces its spec, owner and
	// wanted count; SetServiceScale changes the count alone (and when it
	// was scaled), SetServiceBackoff its crash-loop state; ListServices
	// lists them all; DeleteService removes one (ErrNotFound: none).
	PutService(ctx context.Context, x *Service) error
	SetServiceScale(ctx context.Context, projectID int64, name string, wanted int, at time.Time) error
	SetServiceBackoff(ctx context.Context, projectID int64, name string, fails int, notBefore, endsSeen time.Time) error
	ListServices(ctx context.Context) ([]*Service, error)
	DeleteService(ctx context.Context, projectID int64, name string) error

	// PutFleet creates a fleet or replaces it (issue 17; fleets.go).
	PutFleet(ctx context.Context, f *Fleet) error
	// SetFleetState records a fleet's status and hosts' state.
	SetFleetState(ctx context.Context, name, status, hosts string) error
	// GetFleet returns a fleet (ErrNotFound: none).
	GetFleet(ctx context.Context, name string) (*Fleet, error)
	// ListFleets lists every fleet by name.
	ListFleets(ctx context.Context) ([]*Fleet, error)
	// DeleteFleet removes a fleet (ErrNotFound: none).
	DeleteFleet(ctx context.Context, name string) error
	// PutBlob stores data under digest, its hex SHA-256 (checked by the
	// caller); a digest already stored is left as it is.
	PutBlob(ctx context.Context, digest string, data []byte) error
	// HasBlob says whether digest is stored, and its size.
	HasBlob(ctx context.Context, digest string) (size int64, ok bool, err error)
	// GetBlob returns a blob's bytes (ErrNotFound: none).
	GetBlob(ctx context.Context, digest string) ([]byte, error)
	// PruneBlobs deletes the blobs last used before `before` that no
	// unfinished run names, nor one finished since: how many, how many
	// bytes.
	PruneBlobs(ctx context.Context, before time.Time) (int, int64, error)
	// FindArrayTask returns an array's task by index (ErrNotFound: not
	// created yet, or no such task).
	FindArrayTask(ctx context.Context, arrayID int64, index int) (*Run, error)
	// GetArray returns an array's own record (ErrNotFound: not an array);
	// GetSchedule a schedule's.
	GetArray(ctx context.Context, id int64) (*Array, error)
	GetSchedule(ctx context.Context, id int64) (*Schedule, error)
	// CreateProject makes a project, or a deleted one live again; a live
	// project of that name is ErrExists.
	CreateProject(ctx context.Context, name string) (*Project, error)
	// ProjectByName returns a live project (a deleted one: ErrNotFound).
	ProjectByName(ctx context.Context, name string) (*Project, error)
	// ListProjects lists the live projects by name.
	ListProjects(ctx context.Context) ([]*Project, error)
	// DeleteProject marks a project deleted and removes its members; its
	// row stays, for its runs.
	DeleteProject(ctx context.Context, name string) error
	// SetMember makes a user a member of a project with a role, or
	// changes a member's role.
	SetMember(ctx context.Context, projectID, userID int64, role string) error
	// AddMember makes a user a member with role unless they are one
	// already (their role stays); it reports whether it added them.
	AddMember(ctx context.Context, projectID, userID int64, role string) (bool, error)
	// RemoveMember ends a membership (none: ErrNotFound).
	RemoveMember(ctx context.Context, projectID, userID int64) error
	// ListMembers lists live users' memberships of live projects, by
	// project and user name: of a project, of a user, or all (0, 0).
	ListMembers(ctx context.Context, projectID, userID int64) ([]*Member, error)
	ProjectName(ctx context.Context, id int64) (string, error)
	UserName(ctx context.Context, id int64) (string, error)
	// CloudStore: backend fleets' instances and volumes (cloud.go).
	CloudStore

	Close() error
}

// Run is one submission. Spec holds the configuration as JSON.
type Run struct {
	ID        int64
	ProjectID int64
	UserID    int64
	Name      string
	Status    string
	Reason    string
	ExitCode  *int
	Priority  int
	// Spec is the run's configuration (JSON of spec.Task). A write of a
	// run already stored with an empty Spec keeps the stored one (an
	// array's task holds none in memory after it was first written).
	Spec        []byte
	SubmittedAt time.Time
	StartedAt   time.Time // zero until a job starts
	FinishedAt  time.Time // zero until final
	StopReq     int       // 0 none, 1 graceful stop, 2 abort
	// EstimatedStart is the scheduler's estimate for a waiting run (zero: none).
	EstimatedStart time.Time
	// ArrayID is, for a task of an array, the array's run ID (0: not a
	// task); ArrayIndex is its index, meaningful only when ArrayID is set.
	ArrayID    int64
	ArrayIndex int
	// Meta is the server's JSON state of a held, delayed or retried run
	// (an array's or a schedule's progress is in its own record).
	Meta []byte
}

// Job is one node's share of a run, in one attempt.
type Job struct {
	ID          int64
	RunID       int64
	Num         int
	Attempt     int
	Status      string
	Reason      string
	ExitCode    *int
	Node        string
	Alloc       []byte // JSON of api.Alloc
	SubmittedAt time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	LogSize     int64
	MaxRSS      int64 // bytes; 0 unknown
	// Usage is what the job counts for in accounting (JSON of
	// api.JobUsage), set when it ends; nil before, or for a job that
	// ended before it was kept.
	Usage []byte
}

// Step is a job step (srun inside an allocation): JOBID.STEPID.
type Step struct {
	RunID    int64
	StepID   int
	Name     string
	Argv     []byte // JSON list
	Ranks    []byte // JSON list of node ranks
	NTasks   int
	NodeList string // Slurm's compressed host list
	PTY      bool
	// Status is running, done, failed or stopped (cancelled).
	Status     string
	ExitCode   *int
	Exits      []byte // JSON map of node rank to exit status
	StartedAt  time.Time
	FinishedAt time.Time
}

// Node is a registered host. Info holds the agent's report as JSON.
type Node struct {
	Name         string
	Info         []byte
	RegisteredAt time.Time
	LastSeen     time.Time
	// Drain is the server's JSON of the node's drain and health state
	// (nil: none).
	Drain []byte
}

// Event is a line of a run's history.
type Event struct {
	RunID   int64
	JobID   int64
	Time    time.Time
	Type    string
	Message string
}

// LogChunk is one frame of a job's output; Offset is its place in the job's log file.
type LogChunk struct {
	JobID  int64
	Offset int64
	Stream string
	Time   time.Time
	Data   []byte
}

// JobUsage is what one finished job used, and whose it was.
type JobUsage struct {
	RunID      int64
	JobID      int64
	Usage      []byte // JSON of api.JobUsage; nil when not kept
	ProjectID  int64
	UserID     int64
	Alloc      []byte // JSON of api.Alloc
	StartedAt  time.Time
	FinishedAt time.Time
}

// User is an account that holds tokens.
type User struct {
	ID        int64
	Name      string
	Admin     bool
	CreatedAt time.Time
	// Deleted says an administrator deleted the user: no token of theirs
	// works, and their Unix login is not made a user again by itself.
	Deleted bool
}

// Secret is a project's secret as stored: Value is its ciphertext.
type Secret struct {
	ProjectID int64
	Name      string
	Value     []byte
	// SetBy is the user who last set the value.
	SetBy     int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Token is a bearer credential as stored: its SHA-256, never the secret.
// A user's token has UserID; a node's has Node (and UserID 0).
type Token struct {
	ID   string
	Hash string
	Name string
	// UserID and User are the owner of a user's token (User filled on reads).
	UserID int64
	User   string
	// Node is the node a node's token acts as; AssertUsers lets it vouch
	// for its host's Unix users (an agent's local socket).
	Node        string
	AssertUsers bool
	CreatedAt   time.Time
	// ExpiresAt is when the token stops working (zero: never).
	ExpiresAt time.Time
}

// Batch is a set of changes committed together.
type Batch struct {
	Runs  []*Run
	Jobs  []*Job
	Nodes []*Node
	// DeleteNodes are nodes removed from the cluster (after Nodes).
	DeleteNodes []string
	Events      []*Event
	Logs        []*LogChunk
	Steps       []*Step
	// Keys are submissions' idempotency keys and the runs they made.
	Keys []*IdempotencyKey
	// Samples are jobs' metrics samples to keep (one already there, by
	// job, level and time, is kept), SampleCuts ranges of them to drop:
	// the cuts are applied first.
	Samples    []*MetricSample
	SampleCuts []SampleCut
	// Arrays and Schedules are arrays' and schedules' own records, written
	// whole (migration 00027).
	Arrays    []*Array
	Schedules []*Schedule
	// Reserve raises the marks below which run and job IDs may be used
	// (0: unchanged); a batch that does is made durable on disk before
	// Apply returns, whatever the store's sync setting.
	Reserve Reserve
}

// MetricSample is one of a job's metrics samples as kept: Level 0 as its
// agent sent it, 1 folded into a minute; Data is the sample's JSON
// (api.JobSample: the store does not read it).
type MetricSample struct {
	JobID int64
	Level int
	Time  time.Time
	Data  []byte
}

// SampleCut drops the samples of a level taken before Before: of one job,
// or of every job (JobID 0) older than Before; with From set, only those at
// or after From.
type SampleCut struct {
	JobID        int64
	Level        int
	From, Before time.Time
}

// IdempotencyKey is the key a user's submission came with, and its run.
type IdempotencyKey struct {
	UserID  int64
	Key     string
	RunID   int64
	Created time.Time
}

// Reserve is how far run and job IDs are reserved.
type Reserve struct{ Runs, Jobs int64 }

// Add appends o's changes to b, keeping their order.
func (b *Batch) Add(o *Batch) {
	b.Runs = append(b.Runs, o.Runs...)
	b.Jobs = append(b.Jobs, o.Jobs...)
	b.Nodes = append(b.Nodes, o.Nodes...)
	b.DeleteNodes = append(b.DeleteNodes, o.DeleteNodes...)
	b.Events = append(b.Events, o.Events...)
	b.Logs = append(b.Logs, o.Logs...)
	b.Steps = append(b.Steps, o.Steps...)
	b.Keys = append(b.Keys, o.Keys...)
	b.Samples = append(b.Samples, o.Samples...)
	b.SampleCuts = append(b.SampleCuts, o.SampleCuts...)
	b.Arrays = append(b.Arrays, o.Arrays...)
	b.Schedules = append(b.Schedules, o.Schedules...)
	b.Reserve.Runs, b.Reserve.Jobs = max(b.Reserve.Runs, o.Reserve.Runs), max(b.Reserve.Jobs, o.Reserve.Jobs)
}

// Empty reports whether b changes nothing.
func (b *Batch) Empty() bool {
	return len(b.Runs)+len(b.Jobs)+len(b.Nodes)+len(b.DeleteNodes)+len(b.Events)+len(b.Logs)+len(b.Steps)+len(b.Keys)+len(b.Samples)+len(b.SampleCuts)+
		len(b.Arrays)+len(b.Schedules) == 0 &&
		b.Reserve == Reserve{}
}

// Active is the state the leader rebuilds at start.
type Active struct {
	Runs  []*Run
	Jobs  []*Job
	Nodes []*Node
	// Arrays and Schedules are the active ones' records.
	Arrays    []*Array
	Schedules []*Schedule
	MaxRunID  int64
	MaxJobID  int64
}

// RunFilter selects runs for ListRuns, newest first.
type RunFilter struct {
	ProjectID int64 // 0: every project
	// Visible, when not nil, keeps the runs of these projects and those of
	// VisibleUser (the runs a user may see; nil: no such bound).
	Visible     []int64
	VisibleUser int64
	// OnlyUser, when not 0, keeps the runs of this user ID.
	OnlyUser int64
	All      bool  // include final runs
	Limit    int   // 0: no limit
	ArrayID  int64 // only the tasks of this array
	// Brief reads only what an array's restart needs of its tasks: ID,
	// status, start, array ID and index (the rest zero; no spec).
	Brief bool
	// IDs, when set, keeps the runs of these IDs and the tasks of the
	// arrays among them.
	IDs []int64
	// Users, when set, keeps the runs of these users (by name).
	Users []string
	// Statuses, when set, keeps the runs in these statuses.
	Statuses []string
	// Name, when set, keeps the runs of this name (a service's replicas).
	Name string
	// BeforeID keeps the runs of lower IDs (0: no bound): a listing's next
	// page, newest first.
	BeforeID int64
	// Since keeps the runs not final before it (active, or finished at or
	// after it); Until the runs submitted before it. Together they are
	// the runs that existed during [Since, Until), sacct's window. Zero:
	// no bound.
	Since, Until time.Time
}
