package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Users are created, listed, deleted (their row stays, their tokens go)
// and created again; a live name cannot be created twice.
func TestUsers(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		alice, err := s.CreateUser(ctx, "alice", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "alice", true); !errors.Is(err, ErrExists) {
			t.Errorf("alice again: %v, want ErrExists", err)
		}
		if _, err := s.CreateUser(ctx, "root-ish", true); err != nil {
			t.Fatal(err)
		}
		if err := s.AddToken(ctx, alice.ID, "h-alice", "laptop"); err != nil {
			t.Fatal(err)
		}
		if u, err := s.UserByToken(ctx, "h-alice"); err != nil || u.Name != "alice" {
			t.Fatalf("alice's token: %v %v", u, err)
		}
		names := func() []string {
			us, err := s.ListUsers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, u := range us {
				out = append(out, u.Name)
			}
			return out
		}
		if diff := cmp.Diff([]string{"alice", "root-ish"}, names()); diff != "" {
			t.Errorf("users (-want +got):\n%s", diff)
		}
		if err := s.DeleteUser(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, "alice"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting alice twice: %v, want ErrNotFound", err)
		}
		if _, err := s.UserByToken(ctx, "h-alice"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a deleted user's token: %v, want ErrNotFound", err)
		}
		if u, err := s.UserByName(ctx, "alice"); err != nil || !u.Deleted || u.ID != alice.ID {
			t.Errorf("deleted alice: %+v %v, want her row, marked deleted", u, err)
		}
		if n, err := s.UserName(ctx, alice.ID); err != nil || n != "alice" {
			t.Errorf("a deleted user's name (her runs show it): %q %v", n, err)
		}
		if diff := cmp.Diff([]string{"root-ish"}, names()); diff != "" {
			t.Errorf("users after the delete (-want +got):\n%s", diff)
		}
		again, err := s.CreateUser(ctx, "alice", true)
		if err != nil || again.ID != alice.ID || !again.Admin || again.Deleted {
			t.Errorf("alice created again: %+v %v, want her row back, live, admin", again, err)
		}
		if _, err := s.UserByToken(ctx, "h-alice"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a revived user's old token: %v, want ErrNotFound (deleted with her)", err)
		}
	})
}

// Tokens of users and of nodes: created, resolved by hash, listed without
// their hashes, revoked by ID.
func TestTokens(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		bob, err := s.CreateUser(ctx, "bob", false)
		if err != nil {
			t.Fatal(err)
		}
		exp := ts(100)
		for _, tk := range []*Token{
			{ID: "t1", Hash: "h1", Name: "ci", UserID: bob.ID, CreatedAt: ts(1), ExpiresAt: exp},
			{ID: "t2", Hash: "h2", Name: "n1", Node: "n1", AssertUsers: true, CreatedAt: ts(2)},
			{ID: "t3", Hash: "h3", Name: "n2", Node: "n2", CreatedAt: ts(3)},
		} {
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateToken(ctx, &Token{ID: "t1", Hash: "h9", UserID: bob.ID}); err == nil {
			t.Error("a second token with ID t1 was stored")
		}
		tk, u, err := s.TokenByHash(ctx, "h1")
		if err != nil || u == nil || u.Name != "bob" || tk.ID != "t1" || !tk.ExpiresAt.Equal(exp) || tk.Node != "" {
			t.Errorf("h1: %+v %+v %v, want bob's t1 expiring at %v", tk, u, err, exp)
		}
		tk, u, err = s.TokenByHash(ctx, "h2")
		if err != nil || u != nil || tk.Node != "n1" || !tk.AssertUsers {
			t.Errorf("h2: %+v %+v %v, want n1's node token that asserts users", tk, u, err)
		}
		if _, err := s.UserByToken(ctx, "h2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a node's token as a user's: %v, want ErrNotFound", err)
		}
		all, err := s.ListTokens(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []*Token{
			{ID: "t1", Name: "ci", UserID: bob.ID, User: "bob", CreatedAt: ts(1), ExpiresAt: exp},
			{ID: "t2", Name: "n1", Node: "n1", AssertUsers: true, CreatedAt: ts(2)},
			{ID: "t3", Name: "n2", Node: "n2", CreatedAt: ts(3)},
		}
		if diff := cmp.Diff(want, all); diff != "" {
			t.Errorf("every token (-want +got):\n%s", diff)
		}
		mine, err := s.ListTokens(ctx, bob.ID)
		if err != nil || len(mine) != 1 || mine[0].ID != "t1" {
			t.Errorf("bob's tokens: %v %v", mine, err)
		}
		got, err := s.RevokeToken(ctx, "t2")
		if err != nil || got.Hash != "h2" || got.Node != "n1" {
			t.Errorf("revoke t2: %+v %v", got, err)
		}
		if _, _, err := s.TokenByHash(ctx, "h2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a revoked token: %v, want ErrNotFound", err)
		}
		if _, err := s.RevokeToken(ctx, "t2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoking t2 twice: %v, want ErrNotFound", err)
		}
	})
}

func TestEnsureKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		for _, v := range []string{"first", "second"} {
			got, err := s.EnsureKey(ctx, "jobs", v)
			if err != nil || got != "first" {
				t.Errorf("EnsureKey(%q) = %q, %v; want the first value stored", v, got, err)
			}
		}
	})
}

// The database and its WAL are the owner's only, even under a lax umask
// and for a file made before (0644).
func TestDatabaseFilesPrivate(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "sub", "new.db"), old} {
		s := openTest(t, path)
		if _, err := s.EnsureProject(context.Background(), "main"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s: mode %v, want 0600", p, m)
			}
		}
		s.Close()
	}
	fi, err := os.Stat(filepath.Join(dir, "sub"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the database's new directory: %v %v, want 0700", fi.Mode(), err)
	}
}
