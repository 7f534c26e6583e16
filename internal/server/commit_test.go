package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// gatedStore holds every commit while its gate is shut.
type gatedStore struct {
	store.Store
	mu     sync.Mutex
	shut   chan struct{} // nil: open
	queued chan struct{} // a commit is waiting at the gate
}

func (g *gatedStore) Apply(ctx context.Context, b *store.Batch) error {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		select {
		case g.queued <- struct{}{}:
		default:
		}
		<-shut
	}
	return g.Store.Apply(ctx, b)
}

func (g *gatedStore) close() func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.queued = make(chan struct{}), make(chan struct{}, 1)
	shut := g.shut
	return func() {
		g.mu.Lock()
		g.shut = nil
		g.mu.Unlock()
		close(shut)
	}
}

// A job's end lets the scheduler place the next run while the end is still
// being committed (the pass need not wait for it), but the placement reaches
// the agent only once durable, after the end that freed its room.
func TestEndFreesRoomBeforeItsCommit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var st *gatedStore
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) {
		st = &gatedStore{Store: c.Store}
		c.Store, c.StopGrace, c.PingEvery, c.ResyncEvery = st, time.Second, time.Hour, time.Hour
	})
	srv, sq, c := h.srv, h.st, h.c

	// A fake agent of one CPU: its stream's assignments arrive on assigned.
	if err := c.Register(ctx, api.NodeInfo{Name: "n1", CPUs: 1, Memory: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	assigned := make(chan api.Assignment, 16)
	go func() {
		_ = c.AgentStream(ctx, "n1", func(m api.AgentMessage) error {
			for _, a := range m.Jobs {
				if m.Type == "assign" || m.Type == "sync" {
					assigned <- a
				}
			}
			return nil
		})
	}()
	var runs []int64
	for range 2 {
		r, err := c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\nresources: {cpu: 1}\n")})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	first := <-assigned
	if first.RunID != runs[0] {
		t.Fatalf("first assignment is of run %d, want %d", first.RunID, runs[0])
	}

	// Once the second run's pending reason is written, nothing but a change
	// wakes the scheduler (the safety net is an hour away).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		due := srv.Due() // the reasons' flush (no run is held)
		srv.unlock()
		if due.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pending reasons were not written")
		}
	}

	open := st.close()
	ended := make(chan error, 1)
	go func() {
		_, err := c.AgentEvents(ctx, api.AgentEvents{Node: "n1", Events: []api.AgentEvent{
			{JobID: first.JobID, Type: "started", Time: time.Now()},
			{JobID: first.JobID, Type: "exited", Time: time.Now()},
		}})
		ended <- err
	}()
	<-st.queued // the end's commit waits at the gate
	// The next run is placed while the end is not yet durable...
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		_, pending := srv.BlockedBy(runs[1])
		srv.unlock()
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			open()
			t.Fatal("the second run was not placed while the first one's end was being committed")
		}
	}
	// ...but nobody outside hears of either before it is.
	select {
	case a := <-assigned:
		open()
		t.Fatalf("job %d assigned before the end that made room for it was durable", a.JobID)
	case err := <-ended:
		open()
		t.Fatalf("the end was acknowledged before it was durable (%v)", err)
	default:
	}
	open()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if next := <-assigned; next.RunID != runs[1] {
		t.Fatalf("next assignment is of run %d, want %d", next.RunID, runs[1])
	}
	r, err := sq.GetRun(ctx, runs[0])
	if err != nil || r.Status != string(api.StatusDone) {
		t.Fatalf("first run in the store: %+v, %v", r, err)
	}
}
