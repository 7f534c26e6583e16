// Package api is the wire contract of Berth's HTTP API under /api/v1: the JSON
// shapes that the server sends and the client, the CLI and the agents read.
// It holds no behaviour beyond small helpers on those shapes.
package api

import (
	"time"

	"github.com/berth-hq/berth/internal/lifecycle"

	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/spec"
)

// Version is the API's path prefix.
const Version = "/api/v1"

// Status is a run's or a job's state, in dstack's vocabulary (lifecycle
// owns it; the API carries it).
type Status = lifecycle.Status

// The states a run or a job goes through. Submitted, provisioning, pulling,
// running and terminating are active; the others are final.
const (
	StatusSubmitted    = lifecycle.StatusSubmitted
	StatusProvisioning = lifecycle.StatusProvisioning
	StatusPulling      = lifecycle.StatusPulling
	StatusRunning      = lifecycle.StatusRunning
	StatusTerminating  = lifecycle.StatusTerminating
	StatusDone         = lifecycle.StatusDone
	StatusFailed       = lifecycle.StatusFailed
	StatusTerminated   = lifecycle.StatusTerminated
	StatusAborted      = lifecycle.StatusAborted
	StatusScheduled    = lifecycle.StatusScheduled
)

// Termination and pending reasons (lifecycle.Reason's values, as the wire's
// plain strings). Pending reasons follow Slurm's codes so that the Slurm
// commands can print them unchanged; termination reasons follow dstack.
const (
	ReasonNone               = string(lifecycle.ReasonNone)
	ReasonPriority           = string(lifecycle.ReasonPriority)
	ReasonResources          = string(lifecycle.ReasonResources)
	ReasonNoNode             = string(lifecycle.ReasonNoNode)
	ReasonDone               = string(lifecycle.ReasonDone)
	ReasonExitedWithError    = string(lifecycle.ReasonExitedWithError)
	ReasonTerminatedByUser   = string(lifecycle.ReasonTerminatedByUser)
	ReasonAbortedByUser      = string(lifecycle.ReasonAbortedByUser)
	ReasonMaxDuration        = string(lifecycle.ReasonMaxDuration)
	ReasonFailedToStart      = string(lifecycle.ReasonFailedToStart)
	ReasonLostByAgent        = string(lifecycle.ReasonLostByAgent)
	ReasonTerminatedByAgent  = string(lifecycle.ReasonTerminatedByAgent)
	ReasonPreempted          = string(lifecycle.ReasonPreempted)
	ReasonPartitionTimeLimit = string(lifecycle.ReasonPartitionTimeLimit)
	ReasonPartitionDown      = string(lifecycle.ReasonPartitionDown)
	ReasonOOM                = string(lifecycle.ReasonOOM)
)

// Run is what a user submitted: one configuration, one or more jobs.
type Run struct {
	ID          int64      `json:"id"`
	Name        string     `json:"name"`
	Project     string     `json:"project"`
	User        string     `json:"user"`
	Status      Status     `json:"status"`
	Reason      string     `json:"reason"`
	ExitCode    *int       `json:"exit_code"`
	Priority    int        `json:"priority"`
	SubmittedAt time.Time  `json:"submitted_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	// EstimatedStart is when the scheduler expects a waiting run to start.
	EstimatedStart *time.Time `json:"estimated_start,omitempty"`
	// BlockedBy are the runs a waiting run waits for (their allocations,
	// reservations, or higher priority), as of the last scheduling pass.
	BlockedBy []int64    `json:"blocked_by,omitempty"`
	Resources string     `json:"resources"`
	Nodes     []string   `json:"nodes,omitempty"`
	Jobs      []Job      `json:"jobs,omitempty"`
	Spec      *spec.Task `json:"spec,omitempty"`
	// Events are the run's history (placed, stop, job_finished, …); only
	// GET /runs/{ref} gives them.
	Events []Event `json:"events,omitempty"`
	// Array is set on an array's own run; ArrayID and ArrayIndex on each of
	// its tasks.
	Array      *ArrayInfo `json:"array,omitempty"`
	ArrayID    int64      `json:"array_id,omitempty"`
	ArrayIndex *int       `json:"array_index,omitempty"`
	// URLs are where the gateway answers a service on its domain (berth
	// server --gateway-domain), in the answer to its apply.
	URLs []string `json:"urls,omitempty"`
}

// ArrayInfo is an array's progress: its indices as written, its throttle,
// and the tasks not created yet (Slurm's folded pending line, e.g.
// "7-100"), with their count.
type ArrayInfo struct {
	Indices  string `json:"indices"`
	Count    int    `json:"count"`
	Throttle int    `json:"throttle"`
	Waiting  string `json:"waiting,omitempty"`
	NWaiting int    `json:"n_waiting"`
	Failed   int    `json:"failed"`
}

// Event is one line of a run's history.
type Event struct {
	Time    time.Time `json:"time"`
	JobID   int64     `json:"job_id,omitempty"`
	Type    string    `json:"type"`
	Message string    `json:"message,omitempty"`
}

// Job is one node's share of a run.
type Job struct {
	ID          int64      `json:"id"`
	RunID       int64      `json:"run_id"`
	Num         int        `json:"job_num"`
	Attempt     int        `json:"attempt"`
	Status      Status     `json:"status"`
	Reason      string     `json:"reason"`
	ExitCode    *int       `json:"exit_code"`
	Node        string     `json:"node,omitempty"`
	Alloc       Alloc      `json:"alloc"`
	SubmittedAt time.Time  `json:"submitted_at"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	LogSize     int64      `json:"log_size"`
	// MaxRSS is the most memory the job held at once (bytes; 0: unknown).
	MaxRSS int64 `json:"max_rss,omitempty"`
	// Usage is what the job counts for in accounting, once it has ended.
	Usage *JobUsage `json:"usage,omitempty"`
}

// Alloc is what a job holds on its node.
type Alloc struct {
	CPUs   int   `json:"cpus"`
	Memory int64 `json:"memory"`
	GPUs   []int `json:"gpus,omitempty"`
}

// GPU is one device on a node.
type GPU struct {
	Index  int    `json:"index"`
	Vendor string `json:"vendor"`
	Name   string `json:"name"`
	Memory int64  `json:"memory"`
	UUID   string `json:"uuid,omitempty"`
}

// NodeInfo is what an agent reports about its host when it registers.
type NodeInfo struct {
	Name     string `json:"name"`
	Fleet    string `json:"fleet,omitempty"` // the fleet (Slurm: partition) the node belongs to
	Addr     string `json:"addr"`
	CPUs     int    `json:"cpus"`
	Memory   int64  `json:"memory"`
	GPUs     []GPU  `json:"gpus,omitempty"`
	Declared bool   `json:"declared"`
	Cgroups  string `json:"cgroups"` // v1, v2, or none
	// Limits says what the kernel enforces on this node's jobs ("memory,
	// cpu (cgroup v1)"), or "none (why)".
	Limits string `json:"limits"`
	// Disk says whether the node enforces resources.disk: "enforced
	// (ext4 image)" or "not enforced: WHY" (empty: an agent older than it).
	Disk string `json:"disk,omitempty"`
	// Mounts says whether the node gives a job without a container its
	// volumes and /dev/shm in a mount namespace: "namespaces" or "none
	// (why)" (empty: an agent older than it).
	Mounts string `json:"mounts,omitempty"`
	// Containers says whether the node runs `image:` jobs: "docker 1.41"
	// (the engine and its API version), or "none (why)". See CanRunContainers.
	Containers string `json:"containers"`
	// EngineID is the container engine's own ID (empty: none, or an
	// older agent): nodes with the same one share its Docker volumes.
	EngineID string `json:"engine_id,omitempty"`
	// RunAs says whose jobs' processes are whose on this node (RunAsUser,
	// ...); empty: an agent older than the field, whose jobs ran as itself.
	RunAs   string `json:"run_as,omitempty"`
	Version string `json:"version"`
	// Features are the node's features (berth agent --features; Slurm's
	// node features), which a run's constraint asks for.
	Features []string `json:"features,omitempty"`
	// Runtimes are the Pythons and nvcc the node offers a run without an
	// image (`python:`, `nvcc:`): "python3.12" or "nvcc" → the host's
	// binary ("/usr/bin/python3.12") or "image NAME" (runtime.go).
	Runtimes map[string]string `json:"runtimes,omitempty"`
	// Blocks is how many equal blocks the node is split into (berth agent
	// --blocks, resolved; 0: as its fleet says). The server's node list
	// shows the count in force, and BusyBlocks.
	Blocks int `json:"blocks,omitempty"`
}

// A node's RunAs: how its agent runs jobs. As RunAsUser, jobs run as their
// user's Unix account on the node (the agent is root); RunAsUserElseAgent
// also runs those of a user with no account there as the agent's user
// (--run-as-agent); an agent that is not root runs every job as itself
// with --run-as-agent ("agent (LOGIN)"), else only its own login's
// ("only LOGIN").
const (
	RunAsUser          = "user"
	RunAsUserElseAgent = "user, else agent (root)"
)

// RootLogin is the Unix login of Berth's admin user: root (UID 0) is the
// admin through an agent's socket, and the admin's jobs run as root.
const RootLogin = "root"

// Node is a host of the cluster as the server sees it.
type Node struct {
	NodeInfo
	// Status is what berth fleet shows: idle, busy, "idle (warning)",
	// "idle (failure)", "drained (REASON)", "draining (REASON)", offline,
	// unreachable (see the server's nodeStatus); Reason says why the node
	// is drained or not healthy.
	Status      string `json:"status"`
	Reason      string `json:"reason,omitempty"`
	AllocCPUs   int    `json:"alloc_cpus"`
	AllocMemory int64  `json:"alloc_memory"`
	AllocGPUs   int    `json:"alloc_gpus"`
	// BusyBlocks are the blocks jobs hold on a node split in blocks.
	BusyBlocks int       `json:"busy_blocks,omitempty"`
	Jobs       int       `json:"jobs"`
	LastSeen   time.Time `json:"last_seen"`
	// Health is the node's last health report; Drain an administrator's
	// drain (see metrics.go).
	Health *NodeHealth `json:"health,omitempty"`
	Drain  *NodeDrain  `json:"drain,omitempty"`
}

// SubmitRequest asks the server to create a run.
type SubmitRequest struct {
	Spec   *spec.Task `json:"spec"`
	Source string     `json:"source,omitempty"` // the file the configuration came from, for messages
	// Hold submits the run held (Slurm's --hold): it waits with reason
	// JobHeldUser until released.
	Hold bool `json:"hold,omitempty"`
	// Begin defers the run until then (Slurm's --begin; reason BeginTime).
	Begin time.Time `json:"begin,omitzero"`
	// UniqueName refuses the run (409) while an active run of its project
	// has its name, as dstack does; `berth apply` sets it.
	UniqueName bool `json:"unique_name,omitempty"`
}

// ControlRequest changes a run as scontrol does. Action is hold, release,
// requeue or update; update sets the fields given: the time limit in
// seconds, 0 none (a waiting run's, or a running one's: its jobs' deadline
// moves, counted from their start; only an admin may raise a running run's);
// a waiting run's priority 0..100 and nice; an array's throttle, 0 none;
// tags (an empty value removes one).
type ControlRequest struct {
	Action        string            `json:"action"`
	TimeLimit     *int64            `json:"time_limit,omitempty"`
	Priority      *int              `json:"priority,omitempty"`
	Nice          *int64            `json:"nice,omitempty"`
	ArrayThrottle *int              `json:"array_throttle,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
}

// PlanRow is one node's answer to "where would this run go".
type PlanRow struct {
	Node      string `json:"node"`
	Resources string `json:"resources"`
	Fits      string `json:"fits"` // "now", "later", "never"
	Why       string `json:"why,omitempty"`
}

// Plan is the server's answer to a dry run.
type Plan struct {
	Name      string `json:"name"`
	Resources string `json:"resources"`
	// Allocated is what each job is given, and so its limits: the lower
	// bound of each range (blocks and exclusive nodes may give more).
	Allocated   string    `json:"allocated"`
	Nodes       int       `json:"nodes"`
	Rows        []PlanRow `json:"rows"`
	FitsNow     bool      `json:"fits_now"`
	Unsupported []string  `json:"unsupported,omitempty"`
	// Active is the active run of the project with the configuration's
	// name, with its configuration (Spec), if there is one: `berth apply`
	// shows the difference and offers to replace it, as dstack does.
	Active *Run `json:"active,omitempty"`
	// Notes are what several rows share, said once (a container engine's
	// error).
	Notes []string `json:"notes,omitempty"`
	// Offers are what backend fleets the run may use could create for it
	// when no node can start it now (cheapest first; cloud.go).
	Offers []provider.Offer `json:"offers,omitempty"`
}

// StopRequest stops a run: gracefully, or at once when Abort is set.
type StopRequest struct {
	Abort bool `json:"abort"`
}

// LogEntry is one piece of a job's output.
type LogEntry struct {
	JobID  int64     `json:"job_id"`
	JobNum int       `json:"job_num"`
	Offset int64     `json:"offset"`
	Stream string    `json:"stream"` // stdout or stderr
	Time   time.Time `json:"time"`
	Data   []byte    `json:"data"`
}

// LogFrame is one line of a log stream: an entry, or the end of the run.
type LogFrame struct {
	Entry *LogEntry `json:"entry,omitempty"`
	End   *Run      `json:"end,omitempty"`
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
	// Field is the configuration's field the error is about (env[1],
	// registry_auth.password), when it is about one: the client shows it
	// at its line.
	Field string `json:"field,omitempty"`
}

// Assignment tells an agent to run a job, or what the server knows of one it runs.
type Assignment struct {
	JobID       int64    `json:"job_id"`
	RunID       int64    `json:"run_id"`
	RunName     string   `json:"run_name"`
	JobNum      int      `json:"job_num"`
	Attempt     int      `json:"attempt"`
	Status      Status   `json:"status"`
	Commands    []string `json:"commands"`
	Env         []string `json:"env"`
	WorkingDir  string   `json:"working_dir,omitempty"`
	MaxDuration int64    `json:"max_duration,omitempty"` // seconds; 0 = none
	Grace       int64    `json:"grace"`                  // seconds between SIGTERM and SIGKILL on stop
	Alloc       Alloc    `json:"alloc"`
	LogSize     int64    `json:"log_size"`       // bytes of the job's log the server holds
	Stop        int      `json:"stop,omitempty"` // 1 graceful, 2 abort
	// Container, when set, runs the job in a container (the run's `image:`)
	// instead of as processes on the host; see ContainerFor.
	Container *Container `json:"container,omitempty"`
	// Shell runs a host job's commands (the run's `shell:`: sh, bash or
	// an absolute path); empty: bash.
	Shell string `json:"shell,omitempty"`
	// Batch: Commands[0] is a Slurm batch script, run as slurmd runs one
	// (batch.go).
	Batch *BatchScript `json:"batch,omitempty"`
	// Signal, when set, is sent to the job before MaxDuration (`signal:`).
	Signal *SignalAt `json:"signal,omitempty"`
	// Hostfile is the run's MPI hostfile ("ADDR slots=N" per node, in rank
	// order), which the agent writes for DSTACK_MPI_HOSTFILE.
	Hostfile string `json:"hostfile,omitempty"`
	// JobToken is the run's own credential (BERTH_JOB_TOKEN in the job's
	// environment): its steps and reads of the run, while it is active.
	JobToken string `json:"job_token,omitempty"`
	// ProjectID is the run's project, whose secrets the server puts in
	// (`${{ secrets.NAME }}`) as it sends the assignment; not sent.
	ProjectID int64 `json:"-"`
	// User is the Unix login the job runs as on its node: the run's user
	// (the admin's is RootLogin). Empty: a server older than the field;
	// the job runs as the agent's user.
	User string `json:"user,omitempty"`
	// Archives are the run's packed repo and files, which the node fetches
	// (GET /api/runs/RUN/blobs/DIGEST with JobToken) and unpacks, as the
	// job's user, before the commands run (spec.Archive).
	Archives []spec.Archive `json:"archives,omitempty"`
	// Clones are the run's repos given by URL, cloned before the archives
	// are unpacked (clone.go).
	Clones []Clone `json:"clones,omitempty"`
	// Disk is the run's resources.disk (its minimum, bytes; 0: none): the
	// size of the job's working directory where the node enforces it
	// (internal/agent/disk.go).
	Disk int64 `json:"disk,omitempty"`
	// Python ("3.12") and Nvcc are the run's `python:` and `nvcc:` when it
	// names no image: the node runs it with the matching runtime
	// (NodeInfo.Runtimes; internal/agent/runtime.go).
	Python string `json:"python,omitempty"`
	Nvcc   bool   `json:"nvcc,omitempty"`
	// Mounts and ShmSize are a job without a container's volumes (network
	// ones with the node's path filled in as InstancePath) and /dev/shm
	// size, made in a mount namespace of the job (internal/agent/mountns.go).
	Mounts  []spec.Volume `json:"mounts,omitempty"`
	ShmSize int64         `json:"shm_size,omitempty"`
}

// SignalAt is a signal to send Before seconds before the job's time limit;
// BatchOnly sends it to the job's main process only, StepsOnly to the
// tasks of its srun steps only (Slurm's --signal without B:), else to all
// of its processes.
type SignalAt struct {
	Number    int   `json:"number"`
	Before    int64 `json:"before"`
	BatchOnly bool  `json:"batch_only,omitempty"`
	StepsOnly bool  `json:"steps_only,omitempty"`
}

// AgentMessage is one line of the stream from the server to an agent.
type AgentMessage struct {
	Type string `json:"type"` // sync, assign, stop, signal, limit, tunnel, ping
	// Sync lists every active job the server places on this node; the agent
	// starts those it lacks and reports those the server does not know it ran.
	Jobs  []Assignment `json:"jobs,omitempty"`
	Stop  *StopJob     `json:"stop,omitempty"`
	Kill  *KillJob     `json:"kill,omitempty"`  // Type "signal"
	Limit *JobLimit    `json:"limit,omitempty"` // Type "limit"
	// Tunnel asks for a stream to a port inside a job (tunnel.go).
	Tunnel *TunnelOpen `json:"tunnel,omitempty"` // Type "tunnel"
}

// JobLimit gives a placed job a new time limit (scontrol update
// TimeLimit=): MaxDuration seconds from the job's start, 0 none. A limit
// already passed ends the job at once (max_duration_exceeded). A sync's
// assignments carry the run's current limit too, for an agent that missed
// this message.
type JobLimit struct {
	JobID       int64 `json:"job_id"`
	MaxDuration int64 `json:"max_duration"`
}

// KillJob asks an agent to send a signal to one job's processes without
// stopping it (scancel --signal): all of them (scancel -f), with BatchOnly
// the job's main process only (scancel -b), with StepsOnly the tasks of
// its srun steps only (scancel without -b or -f, as Slurm).
type KillJob struct {
	JobID     int64 `json:"job_id"`
	Signal    int   `json:"signal"`
	BatchOnly bool  `json:"batch_only,omitempty"`
	StepsOnly bool  `json:"steps_only,omitempty"`
}

// SignalRequest signals a run's running jobs (POST /runs/{ref}/signal):
// every process of each, or only the main process (BatchOnly) or only
// the tasks of its srun steps (StepsOnly).
type SignalRequest struct {
	Signal    int  `json:"signal"`
	BatchOnly bool `json:"batch_only,omitempty"`
	StepsOnly bool `json:"steps_only,omitempty"`
}

// StopJob asks an agent to stop one job.
type StopJob struct {
	JobID int64 `json:"job_id"`
	Abort bool  `json:"abort"`
}

// AgentEvent is something an agent reports about a job.
type AgentEvent struct {
	JobID    int64     `json:"job_id"`
	Type     string    `json:"type"` // started, log, exited
	Time     time.Time `json:"time"`
	Offset   int64     `json:"offset,omitempty"`
	Size     int64     `json:"size,omitempty"` // bytes of the log file this entry spans (frame)
	Stream   string    `json:"stream,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	ExitCode int       `json:"exit_code,omitempty"`
	Signal   string    `json:"signal,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Message  string    `json:"message,omitempty"`
	// NeverStarted says the job ended before its commands ran.
	NeverStarted bool `json:"never_started,omitempty"`
	// OOMKilled says the kernel killed a process of the job for exceeding
	// its memory.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// MaxRSS is, on exited, the most memory the job held at once (its
	// cgroup's peak; 0: unknown).
	MaxRSS int64 `json:"max_rss,omitempty"`
	// Masked is, on a log event, how many bytes the server took out of
	// Data when it masked the run's secrets (negative when it put held
	// bytes back): Size still counts the frame in the agent's file. Set by
	// the server only, never read from an agent.
	Masked int64 `json:"-"`
}

// LogFrameHeader is the bytes of a frame's header in a job's output log:
// a "log" event's Size is this plus its data's length.
const LogFrameHeader = 16

// AgentEvents is a batch of events from one node, in order.
type AgentEvents struct {
	Node   string       `json:"node"`
	Events []AgentEvent `json:"events"`
}

// AgentAck answers AgentEvents: for each job, how many bytes of its log the
// server now holds, and the jobs the server considers closed.
type AgentAck struct {
	LogSize map[int64]int64 `json:"log_size"`
	Closed  []int64         `json:"closed,omitempty"`
}

// ServerStatus is what the server says of itself.
type ServerStatus struct {
	ActiveRuns  int `json:"active_runs"`
	PendingRuns int `json:"pending_runs"`
	Nodes       int `json:"nodes"`
	// Commits counts store transactions, Batches the changes they carried
	// (group commit: Batches/Commits changes per transaction), Passes the
	// scheduler's passes, all since the server started.
	Commits int64 `json:"commits"`
	Batches int64 `json:"batches"`
	Passes  int64 `json:"passes"`
	// HeapLive is the Go heap the last collection found live, HeapGoal
	// the size the next one starts at (the collector's headroom is the
	// difference), in bytes.
	HeapLive int64 `json:"heap_live"`
	HeapGoal int64 `json:"heap_goal"`
	// MaxScriptBytes bounds a run's commands (Slurm's max_script_size).
	MaxScriptBytes int64 `json:"max_script_bytes,omitempty"`
	// Config is the server's settings that scontrol show config and sprio
	// show (absent from servers before it).
	Config *ServerConfig `json:"config,omitempty"`
}

// ServerConfig is the server's scheduling and lifecycle settings, as its
// flags set them. Durations are in seconds.
type ServerConfig struct {
	Policy            string   `json:"policy"` // berth, easy, conservative, fcfs
	Depth             int      `json:"depth"`  // pending runs a pass considers, 0 all
	StopGrace         float64  `json:"stop_grace"`
	UnkillableTimeout float64  `json:"unkillable_timeout"`
	NodeTimeout       float64  `json:"node_timeout"`
	MaxArraySize      int      `json:"max_array_size"`
	MaxNodesPerRun    int      `json:"max_nodes_per_run"`
	FairshareHalfLife float64  `json:"fairshare_half_life"`
	Weights           *Weights `json:"weights"`
}

// Weights are the multifactor priority's weights (berth server
// --priority-weights).
type Weights struct {
	Age        int64   `json:"age"`
	Fairshare  int64   `json:"fairshare"`
	JobSize    int64   `json:"job_size"`
	QOS        int64   `json:"qos"`
	Partition  int64   `json:"partition"`
	Own        int64   `json:"own"`
	Expansion  int64   `json:"expansion"`
	MaxAge     float64 `json:"max_age"` // seconds
	FavorSmall bool    `json:"favor_small"`
}

// RunPriority is a pending run's multifactor priority, factor by factor,
// each already multiplied by its weight (as Slurm's sprio prints them).
type RunPriority struct {
	RunID     int64  `json:"run_id"`
	Name      string `json:"name"`
	User      string `json:"user"`
	Priority  int64  `json:"priority"`
	Age       int64  `json:"age"`
	Fairshare int64  `json:"fairshare"`
	JobSize   int64  `json:"job_size"`
	QOS       int64  `json:"qos"`
	Partition int64  `json:"partition"` // the tier of its fleets, weighted
	Expansion int64  `json:"expansion"` // wait against time limit, weighted
	Own       int64  `json:"own"`       // the run's own priority (0..100) weighted
	Nice      int64  `json:"nice"`
}

// PolicyInfo is the scheduling policy in force (GET /policy): what
// sacctmgr shows of QOS and associations, and the fleets as partitions.
type PolicyInfo struct {
	DefaultQOS   string      `json:"default_qos"`
	QOS          []QOSInfo   `json:"qos"`
	Associations []AssocInfo `json:"associations"`
	Fleets       []FleetInfo `json:"fleets"`
	// DownPartitions are the partitions set DOWN (State=DOWN), sorted.
	DownPartitions []string `json:"down_partitions,omitempty"`
}

// QOSInfo is one QOS.
type QOSInfo struct {
	Name        string     `json:"name"`
	Priority    int        `json:"priority"`
	Preempt     []string   `json:"preempt,omitempty"`
	PreemptMode string     `json:"preempt_mode"`
	Limits      *LimitInfo `json:"limits,omitempty"`      // all runs of the QOS
	UserLimits  *LimitInfo `json:"user_limits,omitempty"` // each user's runs of it
}

// AssocInfo is a project, a user within one (fairshare shares), or a user
// over all projects (User set, Project empty), with its limits.
type AssocInfo struct {
	Project string     `json:"project,omitempty"`
	User    string     `json:"user,omitempty"`
	Shares  int        `json:"shares"`
	Limits  *LimitInfo `json:"limits,omitempty"`
}

// LimitInfo is a set of limits; zero fields are none.
type LimitInfo struct {
	Jobs        int            `json:"jobs,omitempty"`
	Submit      int            `json:"submit,omitempty"`
	CPUs        int            `json:"cpus,omitempty"`
	Memory      int64          `json:"memory,omitempty"`
	GPUs        int            `json:"gpus,omitempty"`
	GPUTypes    map[string]int `json:"gpu_types,omitempty"`
	WallSeconds int64          `json:"wall_seconds,omitempty"`
}

// FleetInfo is a fleet's partition settings.
type FleetInfo struct {
	Name           string   `json:"name"`
	Partitions     []string `json:"partitions,omitempty"`
	Tier           int      `json:"tier"`
	Blocks         int      `json:"blocks"`
	MaxWallSeconds int64    `json:"max_wall_seconds,omitempty"`
}

// PolicyFile is the server's policy file as text (GET and PUT
// /policy/file). Version is the SHA-256 of the text, empty when the file
// does not exist yet; a PUT carries the version it edited and is refused
// (409) when the file has changed since.
type PolicyFile struct {
	Path    string `json:"path,omitempty"`
	Text    string `json:"text"`
	Version string `json:"version"`
}

// Blob is what the server holds of an uploaded archive; MaxSize is the
// most it takes in one.
type Blob struct {
	Digest  string `json:"digest"`
	Size    int64  `json:"size"`
	MaxSize int64  `json:"max_size"`
}
