package sched

import (
	"cmp"
	"fmt"
	"slices"
)

// Switch is one switch of the network tree, as in Slurm's topology.conf: a
// leaf switch lists nodes, a higher one lists switches.
type Switch struct {
	Name     string
	Nodes    []string
	Switches []string
}

// Topology is a tree (or forest) of switches. Multi-node runs are placed
// under the lowest switch that can hold them all, and within it on the
// fewest leaf switches, so their traffic crosses as few links as possible.
type Topology struct {
	switches []*sw
	leafOf   map[string]*sw // node name -> its leaf switch
}

type sw struct {
	name     string
	level    int // 0 for a leaf; else 1 + the highest child's level
	parent   *sw
	children []*sw
	nodes    []string
}

// NewTopology checks a switch list and builds the tree: every switch named
// once, every child known, no node under two leaves, no cycles.
func NewTopology(switches []Switch) (*Topology, error) {
	t := &Topology{leafOf: map[string]*sw{}}
	byName := map[string]*sw{}
	for _, s := range switches {
		if s.Name == "" {
			return nil, fmt.Errorf("sched: topology: a switch has no name")
		}
		if _, dup := byName[s.Name]; dup {
			return nil, fmt.Errorf("sched: topology: switch %q named twice", s.Name)
		}
		if len(s.Nodes) > 0 && len(s.Switches) > 0 {
			return nil, fmt.Errorf("sched: topology: switch %q lists both nodes and switches", s.Name)
		}
		x := &sw{name: s.Name, nodes: slices.Clone(s.Nodes)}
		byName[s.Name] = x
		t.switches = append(t.switches, x)
		for _, n := range s.Nodes {
			if other, dup := t.leafOf[n]; dup {
				return nil, fmt.Errorf("sched: topology: node %q is under both %q and %q", n, other.name, s.Name)
			}
			t.leafOf[n] = x
		}
	}
	for _, s := range switches {
		x := byName[s.Name]
		for _, c := range s.Switches {
			child, ok := byName[c]
			if !ok {
				return nil, fmt.Errorf("sched: topology: switch %q lists unknown switch %q", s.Name, c)
			}
			if child.parent != nil {
				return nil, fmt.Errorf("sched: topology: switch %q is under both %q and %q", c, child.parent.name, s.Name)
			}
			child.parent = x
			x.children = append(x.children, child)
		}
	}
	for _, x := range t.switches {
		seen := 0
		for p := x.parent; p != nil; p = p.parent {
			if p == x || seen > len(t.switches) {
				return nil, fmt.Errorf("sched: topology: switches form a cycle through %q", x.name)
			}
			seen++
		}
	}
	var level func(x *sw) int
	level = func(x *sw) int {
		l := 0
		for _, c := range x.children {
			l = max(l, level(c)+1)
		}
		x.level = l
		return l
	}
	for _, x := range t.switches {
		if x.parent == nil {
			level(x)
		}
	}
	return t, nil
}

// choose picks want of the candidate nodes (all of which fit): under the
// lowest-level switch that has enough of them (ties: the one with the fewest
// candidates, best fit, then name), and within it from the leaf switches with
// the most candidates first, so the run spans the fewest leaves. Nodes under
// no switch are used only when no switch has enough.
func (t *Topology) choose(cands []pick, want int) []pick {
	count := map[*sw]int{}
	for _, c := range cands {
		for x := t.leafOf[c.p.node.Name]; x != nil; x = x.parent {
			count[x]++
		}
	}
	var best *sw
	for _, x := range t.switches {
		n := count[x]
		if n < want {
			continue
		}
		if best == nil || x.level < best.level || x.level == best.level && (n < count[best] || n == count[best] && x.name < best.name) {
			best = x
		}
	}
	if best == nil {
		return cands[:want]
	}
	byLeaf := map[*sw][]pick{}
	for _, c := range cands {
		leaf := t.leafOf[c.p.node.Name]
		if leaf != nil && leaf.under(best) {
			byLeaf[leaf] = append(byLeaf[leaf], c)
		}
	}
	leaves := make([]*sw, 0, len(byLeaf))
	for l := range byLeaf {
		leaves = append(leaves, l)
	}
	slices.SortFunc(leaves, func(a, b *sw) int {
		if c := cmp.Compare(len(byLeaf[b]), len(byLeaf[a])); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	out := make([]pick, 0, want)
	for _, l := range leaves {
		for _, c := range byLeaf[l] {
			if len(out) == want {
				return out
			}
			out = append(out, c)
		}
	}
	return out
}

// under reports whether x is top or sits below it.
func (x *sw) under(top *sw) bool {
	for ; x != nil; x = x.parent {
		if x == top {
			return true
		}
	}
	return false
}

// Leaf names the leaf switch of a node ("" none): for plans and sinfo.
func (t *Topology) Leaf(node string) string {
	if t == nil || t.leafOf[node] == nil {
		return ""
	}
	return t.leafOf[node].name
}
