package slurm

import (
	"strings"
	"time"
)

// NodeState is a node's state: a base state and flags, as Slurm keeps it.
type NodeState uint32

// Base node states.
const (
	NodeUnknown NodeState = iota
	NodeDown
	NodeIdle
	NodeAllocated
	NodeError
	NodeMixed
	NodeFuture
)

// Node state flags, combined with a base state (NodeIdle|NodeDrain), with
// Slurm's bit values (sinfo sorts by the whole number).
const (
	NodeReserved        NodeState = 1 << 5
	NodeDrain           NodeState = 1 << 9
	NodeCompleting      NodeState = 1 << 10
	NodeNoRespond       NodeState = 1 << 11
	NodePoweredDown     NodeState = 1 << 12
	NodeFail            NodeState = 1 << 13
	NodeMaint           NodeState = 1 << 15
	NodeRebootRequested NodeState = 1 << 16
	NodePlanned         NodeState = 1 << 21
	nodeStateBase                 = 0xf
)

var nodeBaseNames = []string{"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"}

// Base is the state without flags.
func (s NodeState) Base() NodeState { return s & nodeStateBase }

func (s NodeState) has(f NodeState) bool { return s&f != 0 }

// suffix is the mark node_state_string appends for flags: $ maintenance,
// @ reboot requested, ~ powered down, * not responding.
func (s NodeState) suffix() string {
	switch {
	case s.has(NodeMaint):
		return "$"
	case s.has(NodeRebootRequested):
		return "@"
	case s.has(NodePoweredDown):
		return "~"
	case s.has(NodeNoRespond):
		return "*"
	}
	return ""
}

// String is the state as sinfo's %T prints it, in lower case
// (node_state_string): IDLE, ALLOCATED, MIXED, DRAINED, DRAINING, DOWN*,
// IDLE~ (powered down)...
func (s NodeState) String() string {
	return s.name([7]string{"MAINT", "REBOOT", "DRAINING", "DRAINED", "FAILING", "FAIL", "DOWN"},
		[6]string{"ALLOCATED", "COMPLETING", "IDLE", "MIXED", "FUTURE", "UNKNOWN"},
		[3]string{"RESERVED", "PLANNED", "MIXED-"})
}

// Compact is the state as sinfo's %t prints it, in lower case
// (node_state_string_compact): IDLE, ALLOC, MIX, DRAIN, DRNG, DOWN*,
// COMP...
func (s NodeState) Compact() string {
	return s.name([7]string{"MAINT", "BOOT", "DRNG", "DRAIN", "FAILG", "FAIL", "DOWN"},
		[6]string{"ALLOC", "COMP", "IDLE", "MIX", "FUTR", "UNK"},
		[3]string{"RESV", "PLND", "MIX-"})
}

// name is node_state_string's decision tree, with the words of the long
// or the compact form.
func (s NodeState) name(special [7]string, base [6]string, other [3]string) string {
	b := s.Base()
	noResp := ""
	if s.has(NodeNoRespond) {
		noResp = "*"
	}
	busy := b == NodeAllocated || b == NodeMixed
	switch {
	case s.has(NodeMaint) && !(s.has(NodeDrain) || busy || b == NodeDown):
		return special[0] + noResp
	case s.has(NodeRebootRequested) && !busy:
		return special[1] + noResp
	case s.has(NodeDrain):
		if s.has(NodeCompleting) || busy {
			return special[2] + s.suffix()
		}
		return special[3] + s.suffix()
	case s.has(NodeFail):
		if s.has(NodeCompleting) || b == NodeAllocated {
			return special[4] + noResp
		}
		return special[5] + noResp
	case b == NodeDown:
		return special[6] + s.suffix()
	case b == NodeAllocated:
		if suf := s.suffix(); suf != "" {
			return base[0] + suf
		}
		if s.has(NodeCompleting) {
			return base[0] + "+"
		}
		return base[0]
	case s.has(NodeCompleting):
		return base[1] + s.suffix()
	case b == NodeIdle:
		switch suf := s.suffix(); {
		case suf != "":
			return base[2] + suf
		case s.has(NodeReserved):
			return other[0]
		case s.has(NodePlanned):
			return other[1]
		}
		return base[2]
	case b == NodeMixed:
		if suf := s.suffix(); suf != "" {
			return base[3] + suf
		}
		if s.has(NodePlanned) {
			return other[2]
		}
		return base[3]
	case b == NodeFuture:
		return base[4] + s.suffix()
	case b == NodeUnknown:
		return base[5] + s.suffix()
	}
	return "?"
}

// Complete is the state as scontrol show node prints it
// (node_state_string_complete): the base, then "+FLAG" for each flag:
// IDLE+DRAIN, MIXED+NOT_RESPONDING.
func (s NodeState) Complete() string {
	out := "?"
	if b := int(s.Base()); b < len(nodeBaseNames) {
		out = nodeBaseNames[b]
	}
	for _, f := range []struct {
		flag NodeState
		name string
	}{
		{NodeCompleting, "COMPLETING"}, {NodeDrain, "DRAIN"}, {NodeFail, "FAIL"}, {NodeMaint, "MAINTENANCE"},
		{NodePoweredDown, "POWERED_DOWN"}, {NodeRebootRequested, "REBOOT_REQUESTED"}, {NodeReserved, "RESERVED"},
		{NodeNoRespond, "NOT_RESPONDING"}, {NodePlanned, "PLANNED"},
	} {
		if s.has(f.flag) {
			out += "+" + f.name
		}
	}
	return out
}

// Node is one compute node as sinfo and scontrol show it.
type Node struct {
	Name           string
	Arch           string
	Sockets        int
	CoresPerSocket int
	ThreadsPerCore int
	Boards         int
	CPUs           int // CPUTot
	CPUsEffective  int // CPUEfctv; CPUs when 0
	CPUsAlloc      int // a node with some but not all CPUs allocated shows as MIXED
	CPULoad        *float64
	Features       string // "" prints (null)
	ActiveFeatures string
	Gres           string // "gpu:4"; "" prints (null)
	GresUsed       string // "gpu:0"
	Addr           string
	Hostname       string
	Port           int // shown only when not the cluster's default (0 here)
	Version        string
	OS             string
	RealMemoryMB   uint64
	AllocMemMB     uint64
	FreeMemMB      *uint64
	State          NodeState // ALLOCATED or IDLE (and flags); MIXED is derived from CPUsAlloc
	TmpDiskMB      uint64
	Weight         int
	Partitions     []string
	BootTime       time.Time
	SlurmdStart    time.Time
	LastBusy       time.Time
	CfgTRES        string // "cpu=2,mem=20000M,billing=2,gres/gpu=4"
	AllocTRES      string
	Reason         string
	ReasonTime     time.Time
	ReasonUser     string
	Comment        string
}

func (n *Node) cpusEffective() int {
	if n.CPUsEffective > 0 {
		return n.CPUsEffective
	}
	return n.CPUs
}

// shownState is the state with MIXED derived as Slurm does: some CPUs
// allocated, not all.
func (n *Node) shownState() NodeState {
	idle := n.cpusEffective() - n.CPUsAlloc
	if n.CPUsAlloc > 0 && idle > 0 {
		return (n.State &^ nodeStateBase) | NodeMixed
	}
	return n.State
}

// PartitionState is a partition's availability.
type PartitionState int

// Partition states.
const (
	PartitionUp PartitionState = iota
	PartitionDown
	PartitionDrain
	PartitionInactive
)

func (s PartitionState) String() string {
	return [...]string{"UP", "DOWN", "DRAIN", "INACTIVE"}[s]
}

// Partition is a partition (a Berth fleet) as sinfo and scontrol show it.
type Partition struct {
	Name           string
	Default        bool
	State          PartitionState
	Nodes          string        // hostlist expression
	MaxTime        time.Duration // Unlimited for none
	DefaultTime    time.Duration // 0 for none
	MaxNodes       int           // 0 for UNLIMITED
	MinNodes       int
	TotalCPUs      int
	TotalNodes     int
	TRES           string // "cpu=2,mem=20000M,node=1,billing=2,gres/gpu=4"
	PriorityTier   int    // default 1
	PriorityFactor int    // default 1
	AllowGroups    string // "" for ALL
	AllowAccounts  string
	AllowQOS       string
	QOS            string
	Hidden         bool
	RootOnly       bool
	ExclusiveUser  bool
	OverSubscribe  string // "NO" (default), "EXCLUSIVE", "YES:4", "FORCE:4"
	GraceTime      time.Duration
	PreemptMode    string // "OFF" by default
	MaxMemPerNode  uint64 // MB; 0 for UNLIMITED
	DefMemPerNode  uint64 // MB; 0 for UNLIMITED
	DefMemPerCPU   uint64 // MB; used instead of DefMemPerNode when set
}

func (p *Partition) priorityTier() int {
	if p.PriorityTier == 0 {
		return 1
	}
	return p.PriorityTier
}

func (p *Partition) priorityFactor() int {
	if p.PriorityFactor == 0 {
		return 1
	}
	return p.PriorityFactor
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func upperOr(s, def string) string {
	if s == "" {
		return def
	}
	return strings.ToUpper(s)
}
