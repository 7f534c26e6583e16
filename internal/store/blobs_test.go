package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A blob is stored once under its digest: has answers its size, get its
// bytes (binary, NULs kept), a second put of the digest keeps the first,
// and an unknown digest is ErrNotFound / not had.
func TestBlobs(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		data := bytes.Repeat([]byte{0, 0x1f, 0x8b, 0xff}, 1000)
		if _, ok, err := s.HasBlob(ctx, "d1"); ok || err != nil {
			t.Fatalf("HasBlob before put = %v, %v", ok, err)
		}
		if err := s.PutBlob(ctx, "d1", data); err != nil {
			t.Fatal(err)
		}
		if err := s.PutBlob(ctx, "d1", []byte("other")); err != nil {
			t.Fatalf("second put: %v", err)
		}
		size, ok, err := s.HasBlob(ctx, "d1")
		if !ok || err != nil || size != int64(len(data)) {
			t.Fatalf("HasBlob = %d, %v, %v", size, ok, err)
		}
		got, err := s.GetBlob(ctx, "d1")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetBlob = %d bytes, %v", len(got), err)
		}
		if _, err := s.GetBlob(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetBlob(nope) = %v, want ErrNotFound", err)
		}
	})
}

// PruneBlobs deletes the blobs last used before the cut that no run
// unfinished, or finished since the cut, names; a blob asked for (HasBlob)
// after the cut is kept, named or not.
func TestPruneBlobs(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		pid, _ := s.EnsureProject(ctx, "main")
		uid, _ := s.EnsureUser(ctx, "u", false)
		digest := func(c byte) string { return strings.Repeat(string(c), 64) }
		for _, c := range "abcdef" {
			if err := s.PutBlob(ctx, digest(byte(c)), bytes.Repeat([]byte{byte(c)}, 10+int(c-'a'))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutBlob(ctx, digest('0'), []byte("zero")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		cut := time.Now()
		time.Sleep(5 * time.Millisecond)
		if _, ok, err := s.HasBlob(ctx, digest('e')); !ok || err != nil {
			t.Fatalf("HasBlob(e) = %v, %v", ok, err)
		}
		run := func(id int64, d string, finished time.Time) *Run {
			spec := fmt.Sprintf(`{"type":"task","archives":[{"digest":%q,"path":"."}]}`, d)
			return &Run{ID: id, ProjectID: pid, UserID: uid, Name: "r", Status: "running", Spec: []byte(spec), SubmittedAt: cut, ArrayIndex: -1, FinishedAt: finished}
		}
		if err := s.Apply(ctx, &Batch{Runs: []*Run{
			run(1, digest('a'), time.Time{}),         // unfinished: a is kept
			run(2, digest('b'), cut.Add(-time.Hour)), // finished before the cut: b goes
			run(3, digest('c'), cut.Add(time.Hour)),  // finished since: c is kept
		}, // an array and a schedule name theirs in their records: f and 0 are kept
			Arrays:    []*Array{{ID: 4, ProjectID: pid, UserID: uid, Indices: "0-1", Active: true, Head: Head{Spec: run(4, digest('f'), time.Time{}).Spec}}},
			Schedules: []*Schedule{{ID: 5, ProjectID: pid, UserID: uid, Active: true, Head: Head{Spec: run(5, digest('0'), time.Time{}).Spec}}},
		}); err != nil {
			t.Fatal(err)
		}
		n, size, err := s.PruneBlobs(ctx, cut)
		if err != nil {
			t.Fatal(err)
		}
		if n != 2 || size != 11+13 {
			t.Errorf("pruned %d blobs, %d bytes; want b and d: 2, 24", n, size)
		}
		for c, kept := range map[byte]bool{'a': true, 'b': false, 'c': true, 'd': false, 'e': true, 'f': true, '0': true} {
			if _, ok, err := s.HasBlob(ctx, digest(c)); ok != kept || err != nil {
				t.Errorf("blob %c: stored %v (%v), want %v", c, ok, err, kept)
			}
		}
		if n, _, err := s.PruneBlobs(ctx, cut); n != 0 || err != nil {
			t.Errorf("a second prune deleted %d (%v)", n, err)
		}
	})
}
