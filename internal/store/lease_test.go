package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// Two replicas on one database: one takes the lease, the other cannot;
// when the leader's lease session is terminated (a partition, as
// PostgreSQL sees it) its ping fails, the other takes the lease and the
// lead, and the deposed leader's next batch is refused by the epoch,
// written nowhere.
func TestLeaseFencing(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	a := openPostgresTest(t, url, PostgresOptions{Replica: true})
	b := openPostgresTest(t, url, PostgresOptions{Replica: true})
	if ok, err := a.TryLease(ctx); err != nil || !ok {
		t.Fatalf("a: TryLease = %v, %v; want true", ok, err)
	}
	if ok, err := b.TryLease(ctx); err != nil || ok {
		t.Fatalf("b: TryLease while a holds it = %v, %v; want false", ok, err)
	}
	ea, err := a.TakeOver(ctx, "http://a")
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string) *Batch {
		return &Batch{Nodes: []*Node{{Name: name, Info: []byte(`{}`), RegisteredAt: ts(0), LastSeen: ts(1)}}}
	}
	if err := a.Apply(ctx, node("from-a-1")); err != nil {
		t.Fatal(err)
	}
	if err := a.PingLease(ctx, 5*time.Second); err != nil {
		t.Fatalf("a: PingLease while leading: %v", err)
	}
	// The partition: PostgreSQL ends a's lease session.
	var n int
	if err := b.w.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'
		AND ((classid::bigint << 32) | objid::bigint) = $1 AND granted`, serverLockID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate a's lease session: %d, %v", n, err)
	}
	if err := a.PingLease(ctx, 5*time.Second); err == nil {
		t.Fatal("a: PingLease after its session was terminated: no error")
	}
	var ok bool
	for deadline := time.Now().Add(30 * time.Second); !ok; time.Sleep(50 * time.Millisecond) {
		if ok, err = b.TryLease(ctx); err != nil || !ok && time.Now().After(deadline) {
			t.Fatalf("b: TryLease after a lost it = %v, %v", ok, err)
		}
	}
	eb, err := b.TakeOver(ctx, "http://b")
	if err != nil || eb != ea+1 {
		t.Fatalf("b: TakeOver = %d, %v; want epoch %d", eb, err, ea+1)
	}
	if err := a.Apply(ctx, node("from-a-2")); !errors.Is(err, ErrFenced) {
		t.Fatalf("a: Apply after b took over = %v; want ErrFenced", err)
	}
	if a.Refused() != 1 || b.Refused() != 0 {
		t.Errorf("refused: a %d, b %d; want 1, 0", a.Refused(), b.Refused())
	}
	if err := b.Apply(ctx, node("from-b")); err != nil {
		t.Fatal(err)
	}
	nodes, err := b.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if len(names) != 2 || names[0] != "from-a-1" || names[1] != "from-b" {
		t.Errorf("nodes = %v; want [from-a-1 from-b] (a's late batch refused)", names)
	}
	if e, u, err := a.Leader(ctx); err != nil || e != eb || u != "http://b" {
		t.Errorf("Leader = %d, %q, %v; want %d, http://b", e, u, err, eb)
	}
}
