package server

import (
	"sync"

	"github.com/berth-hq/berth/internal/store"
)

// changes tells watchers (the dashboard's live views) that the cluster
// changed: a channel they wait on is closed at the next change, and a new
// one made for the change after. A burst of changes closes one channel;
// watchers read the state again once, when they are ready.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// Next is closed at the next change.
func (c *changes) Next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// notify wakes every watcher waiting.
func (c *changes) notify() {
	c.mu.Lock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
	c.mu.Unlock()
}

// seen tells whether a committed batch changed what watchers see: runs,
// arrays, schedules, jobs, nodes or events (not logs, samples or keys
// alone).
func seen(b *store.Batch) bool {
	return len(b.Runs) > 0 || len(b.Arrays) > 0 || len(b.Schedules) > 0 || len(b.Jobs) > 0 || len(b.Nodes) > 0 || len(b.DeleteNodes) > 0 || len(b.Events) > 0 || len(b.Steps) > 0
}
