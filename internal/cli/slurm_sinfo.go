package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

var sinfoOptions = []slurmOpt{
	{"all", 'a', noArg}, {"bg", 'b', noArg}, {"dead", 'd', noArg}, {"exact", 'e', noArg}, {"future", 'F', noArg},
	{"help", 0, noArg}, {"hide", 0, noArg}, {"iterate", 'i', reqArg}, {"local", 0, noArg}, {"long", 'l', noArg},
	{"cluster", 'M', reqArg}, {"clusters", 0, reqArg}, {"nodes", 'n', reqArg}, {"Node", 'N', noArg},
	{"noconvert", 0, noArg}, {"noheader", 'h', noArg}, {"format", 'o', reqArg}, {"Format", 'O', reqArg},
	{"partition", 'p', reqArg}, {"responding", 'r', noArg}, {"list-reasons", 'R', noArg},
	{"summarize", 's', noArg}, {"sort", 'S', reqArg}, {"states", 't', reqArg}, {"reservation", 'T', noArg},
	{"usage", 0, noArg}, {"verbose", 'v', noArg}, {"version", 'V', noArg}, {"federation", 0, noArg},
	{"json", 0, noArg}, {"yaml", 0, noArg},
}

const sinfoUsage = `Usage: sinfo [OPTIONS]
  -a, --all                  show all partitions (including hidden and those
                             not accessible)
  -d, --dead                 show only non-responding nodes
  -e, --exact                group nodes only on exact match of configuration
  -h, --noheader             no headers on output
  -i, --iterate=seconds      specify an iteration period
      --json                 Produce JSON output
  -l, --long                 long output - displays more information
  -n, --nodes=NODES          report on specific node(s)
  -N, --Node                 Node-centric format
  -o, --format=format        format specification
  -O, --Format=format        long format specification
  -p, --partition=PARTITION  report on specific partition
  -r, --responding           report only responding nodes
  -R, --list-reasons         list reason nodes are down or drained
  -s, --summarize            report state summary only
  -t, --states=node_state    specify the what states of nodes to view

Help options:
  --help                     show this help message
  --usage                    display brief usage message

Partitions are Berth's fleets; "berth" (the default) holds every node.
`

func runSinfo(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sinfo", args, sinfoOptions, true)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return slurmFail(1, "sinfo: error: Unrecognized option: "+rest[0], "Usage: sinfo [OPTIONS]")
	}
	var (
		o          slurm.SinfoOptions
		partitions []string
		hosts      []string
		states     []string
		dead, resp bool
		reasons    bool
		asJSON     bool
		iterate    int
	)
	for _, g := range got {
		switch g.name {
		case "help":
			io.WriteString(e.stdout, sinfoUsage)
			return nil
		case "usage":
			fmt.Fprintln(e.stdout, "Usage: sinfo [-abdelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes] [-S fields] [-o format] [-O Format] [--federation] [--local] [--json]")
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "dead":
			dead = true
		case "responding":
			resp = true
		case "iterate":
			n, err := strconv.Atoi(g.val)
			if err != nil || n <= 0 {
				return slurmFail(1, "sinfo: error: --iterate="+g.val+": must be a positive number of seconds")
			}
			iterate = n
		case "long":
			o.Long = true
		case "nodes":
			h, err := slurm.ExpandHostlist(g.val)
			if err != nil {
				return slurmFail(1, "sinfo: error: Invalid node list "+g.val)
			}
			hosts = append(hosts, h...)
		case "Node":
			o.Nodes = true
		case "noheader":
			o.NoHeader = true
		case "format":
			o.Format = g.val
		case "Format":
			o.LongFormat = g.val
		case "partition":
			partitions = append(partitions, splitList(g.val)...)
		case "list-reasons":
			reasons = true
		case "summarize":
			o.Summarize = true
		case "states":
			states = append(states, splitList(strings.ToLower(g.val))...)
		case "json":
			asJSON = true
		case "yaml":
			return slurmFail(1, "sinfo: error: --yaml is not supported by Berth; use --json")
		}
	}
	if reasons && o.Format == "" && o.LongFormat == "" {
		o.LongFormat = "reason:20 ,user:9 ,timestamp:19 ,nodelist:0"
		if o.Long {
			o.LongFormat = "reason:20 ,userlong:12 ,timestamp:19 ,statecompact:6 ,nodelist:0"
		}
	}
	if reasons && len(states) == 0 {
		states = []string{"down", "fail", "drain"} // sinfo's opts.c for -R
	}
	once := func() error {
		v, err := fetchView(e, "sinfo", runSelection{})
		if err != nil {
			return err
		}
		parts, nodes := slurmconv.Nodes(v.Nodes, v.Now, v.Policy)
		nodes = filterNodes(nodes, hosts, states, dead, resp)
		if len(partitions) > 0 {
			var keep []slurm.Partition
			for _, p := range parts {
				if contains(partitions, p.Name) {
					keep = append(keep, p)
				}
			}
			parts = keep
		}
		if reasons {
			// -R does not care about partitions (sinfo.c): each node once.
			parts = reasonPartition(parts, nodes)
		}
		if asJSON {
			io.WriteString(e.stdout, slurm.SinfoJSON(nodes))
			return nil
		}
		o.Now = v.Now.Local()
		out, warnings := slurm.FormatSinfo(parts, nodes, o)
		for _, w := range warnings {
			fmt.Fprintln(e.stderr, w)
		}
		io.WriteString(e.stdout, out)
		return nil
	}
	if iterate == 0 {
		return once()
	}
	for {
		if err := once(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		select {
		case <-e.ctx.Done():
			return nil
		case <-time.After(time.Duration(iterate) * time.Second):
		}
	}
}

// reasonPartition is the one partition sinfo -R lists its nodes in: the
// nodes of the partitions kept, each once.
func reasonPartition(parts []slurm.Partition, nodes []slurm.Node) []slurm.Partition {
	in := map[string]bool{}
	for _, p := range parts {
		hosts, _ := slurm.ExpandHostlist(p.Nodes)
		for _, h := range hosts {
			in[h] = true
		}
	}
	var names []string
	for _, n := range nodes {
		if in[n.Name] {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return []slurm.Partition{{Name: "reasons", Nodes: slurm.CompressHostlist(names), State: slurm.PartitionUp}}
}

// filterNodes keeps the nodes sinfo's -n, -t, -d and -r select.
func filterNodes(nodes []slurm.Node, hosts, states []string, dead, responding bool) []slurm.Node {
	var out []slurm.Node
	for _, n := range nodes {
		if len(hosts) > 0 && !contains(hosts, n.Name) {
			continue
		}
		down := n.State&slurm.NodeNoRespond != 0 || n.State.Base() == slurm.NodeDown
		if dead && !down || responding && down {
			continue
		}
		if len(states) > 0 && !nodeStateMatches(n, states) {
			continue
		}
		out = append(out, n)
	}
	return out
}

// nodeStateMatches is sinfo -t: a state by its long or compact name, in
// any case ("idle", "alloc", "mix", "down").
func nodeStateMatches(n slurm.Node, states []string) bool {
	st := n.State
	if n.CPUsAlloc > 0 && n.CPUsAlloc < n.CPUs {
		st = st&^0xf | slurm.NodeMixed
	}
	long := strings.ToLower(strings.TrimRight(st.String(), "*~#$@+-"))
	short := strings.ToLower(strings.TrimRight(st.Compact(), "*~#$@+-"))
	for _, s := range states {
		s = strings.ToLower(s)
		if s == "all" || s == long || s == short || (s == "allocated" && short == "alloc") || (s == "mixed" && short == "mix") ||
			(s == "drain" && st&slurm.NodeDrain != 0) || (s == "fail" && st&slurm.NodeFail != 0) || (s == "down" && st.Base() == slurm.NodeDown) ||
			(s == "responding" && st&slurm.NodeNoRespond == 0) || (s == "no_respond" && st&slurm.NodeNoRespond != 0) {
			return true
		}
	}
	return false
}
