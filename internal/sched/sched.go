package sched

import (
	"slices"
	"time"
)

// Bytes is an amount of memory.
type Bytes int64

// GPU is one device of a node.
type GPU struct {
	Index  int
	Vendor string
	Name   string
	Memory Bytes
}

// Node is a host as the scheduler sees it: what it has and what is free.
type Node struct {
	Name       string
	Fleet      string // the fleet (partition) it belongs to; "" none
	Online     bool
	CPUs       int
	Memory     Bytes
	GPUs       []GPU
	FreeCPUs   int
	FreeMemory Bytes
	FreeGPUs   []int // indices into GPUs' Index values that no job holds
	// Blocks splits the node in that many equal shares of CPUs, memory and
	// GPUs (dstack's blocks); a job takes whole blocks. 0 or 1: not split.
	Blocks int
	// Containers: the node has a container engine.
	Containers bool
	// Features are the node's features (Slurm's node features), which a
	// request's Features must all be among.
	Features []string
	// Project, when set, is the only project whose runs the node serves:
	// the node belongs to a fleet a project owns (dstack's fleets).
	Project string
}

// GPURequest is what a run needs of GPUs on each node.
type GPURequest struct {
	Count     int
	Vendor    string   // "" any
	Names     []string // any of these models; empty: any model
	MinMemory Bytes    // per GPU
	MaxMemory Bytes    // 0: no upper bound
}

// Request is what each job of a run needs on its node.
type Request struct {
	CPUs   int
	Memory Bytes
	GPU    GPURequest
	// Fleets are the fleets (partitions) the run may use; empty: any node.
	Fleets []string
	// NotFleets are fleets the run may not use (their time limit is
	// shorter than its own), when it names none.
	NotFleets []string
	// Exclusive jobs take their whole node, whatever they ask for.
	Exclusive bool
	// Containers: the run has an image and needs a node with an engine.
	Containers bool
	// Nodes, Exclude and Features narrow the nodes the run may use
	// (nodefilter.go): Slurm's --nodelist, --exclude and --constraint.
	Nodes, Exclude, Features []string
	// Project is the run's project: a node a project owns (Node.Project)
	// serves that project's runs only.
	Project string
}

// inFleet tells whether r may use node n.
func (r Request) inFleet(n *Node) bool {
	if r.Containers && !n.Containers {
		return false
	}
	if !r.nodeAllowed(n) {
		return false
	}
	if n.Project != "" && n.Project != r.Project {
		return false
	}
	if len(r.Fleets) == 0 {
		return len(r.NotFleets) == 0 || !slices.Contains(r.NotFleets, n.Fleet)
	}
	return slices.Contains(r.Fleets, n.Fleet)
}

// Pending is a run waiting to start.
type Pending struct {
	RunID       int64
	Priority    int
	SubmittedAt time.Time
	Nodes       int      // how many jobs, each on its own node
	JobIDs      []int64  // one per node, in job order
	Request     *Request // shared, never changed in place
	// Limit is the run's time limit (its estimate, for reservations);
	// 0: none, the run may hold what it takes for ever.
	Limit time.Duration
	// User, Project, QOS, QOSPriority, Tier and Nice feed the multifactor
	// priority (see Priorities); Priority is the run's own 0..100. User,
	// Project and QOS also say which limits apply (Snapshot.Limits) and
	// whom the run may preempt (Snapshot.QOS).
	User        string
	Project     string
	QOS         string
	QOSPriority int // used when Snapshot.QOS does not define QOS
	Tier        int // the highest priority tier of the fleets it may use
	Nice        int64
	// Groups, when set, make the run heterogeneous (Slurm's hetjob): each
	// group's jobs need its own request, on nodes of their own, all groups
	// at once or none. Nodes is then the total and Request the first
	// group's (for the size factor); JobIDs go group by group.
	Groups []Group
	// Array names the array the run is a task of ("": none), for the
	// array's throttle (a ScopeArray limit).
	Array string
	// Hold, when set, is why the run is not eligible yet (Slurm's
	// Dependency, BeginTime, JobHeldUser, ...): it waits with that reason,
	// neither starts nor reserves, and holds no one up.
	Hold string
}

// Group is one component of a heterogeneous run.
type Group struct {
	Nodes   int
	Request Request
}

// Running is a run that holds resources now.
type Running struct {
	RunID      int64
	Placements []Placement
	// End is when the run is expected to give its resources back (start +
	// time limit); zero: never, as far as planning knows.
	End time.Time
	// User, Project and QOS count its resources against limits and say
	// whether a higher QOS may preempt it.
	User    string
	Project string
	QOS     string
	Array   string
	// Priority ranks victims for preemption (lower goes first); Start is
	// when it started (run time lost); Ending: it is being stopped already.
	Priority int64
	Start    time.Time
	Ending   bool
}

// Snapshot is the cluster as one scheduling pass sees it. Node's Free*
// fields already exclude what Running holds. Schedule does not modify it.
type Snapshot struct {
	Nodes   []Node
	Running []Running
	Pending []Pending
	Policy  Policy
	// Weights, when set, order runs by multifactor priority (Priorities);
	// nil orders by the runs' own Priority field alone.
	Weights *Weights
	Usage   Usage
	Shares  *Shares // the fairshare tree; nil: one share each
	// Depth bounds how many pending runs a pass considers, in priority
	// order (Slurm's bf_max_job_test); the rest wait with reason Priority.
	// 0: all of them, the default.
	Depth int
	// Limits bound what users, projects and QOS may hold at once.
	Limits map[LimitKey]Limits
	// QOS defines the qualities of service runs may name.
	QOS map[string]QOS
	// Topology is the switch tree multi-node runs are placed on (nil: flat).
	Topology *Topology
}

// Placement puts one job on one node.
type Placement struct {
	JobID  int64
	Node   string
	CPUs   int
	Memory Bytes
	GPUs   []int
}

// Start is a run that starts now, with one placement per job.
type Start struct {
	RunID      int64
	Placements []Placement
}

// Plan is the outcome of one pass: what starts, and why the rest waits.
type Plan struct {
	Starts  []Start
	Reasons map[int64]string // run ID -> Slurm-style pending reason
	// Estimates are the expected start times of runs that wait (absent:
	// unknown, e.g. behind runs without a time limit).
	Estimates map[int64]time.Time
	// Reserved are the waiting runs that hold a reservation, in priority
	// order.
	Reserved []int64
	// BlockedBy are, for a waiting run, the runs it waits for: for a run
	// with a reservation, those that hold or have reserved resources on its
	// reserved nodes; for a run that waits behind a higher one, that run;
	// for a run that preempts, its victims.
	BlockedBy map[int64][]int64
	// Preemptions are the running runs to stop for higher-QOS runs.
	Preemptions []Preemption
}

// Pending reasons, as Slurm names them.
const (
	ReasonResources = "Resources"       // the highest-priority waiting run: not enough free now
	ReasonPriority  = "Priority"        // a higher-priority run waits, or holds a reservation this one would delay
	ReasonNoNode    = "ReqNodeNotAvail" // no node could ever hold it
)

func jobID(p *Pending, k int) int64 {
	if k < len(p.JobIDs) {
		return p.JobIDs[k]
	}
	return 0
}
