package cli

import "testing"

func TestStepShare(t *testing.T) {
	// 5 tasks over 2 nodes: 3 on node 0 (ranks 0-2), 2 on node 1 (3-4).
	for _, c := range []struct{ ntasks, nodes, k, n, first int }{
		{5, 2, 0, 3, 0}, {5, 2, 1, 2, 3}, {2, 2, 1, 1, 1}, {4, 2, 2, 0, 4}, {1, 3, 2, 0, 1},
	} {
		if n, first := stepShare(c.ntasks, c.nodes, c.k); n != c.n || first != c.first {
			t.Errorf("stepShare(%d, %d, %d) = %d, %d; want %d, %d", c.ntasks, c.nodes, c.k, n, first, c.n, c.first)
		}
	}
}
