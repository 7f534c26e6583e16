package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"
)

// Projects are created, listed, deleted (their row stays for their runs,
// their members go) and created again; members are added with a role,
// changed, listed by project and by user, and removed.
func TestProjectsAndMembers(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		alice, err := s.CreateUser(ctx, "alice", false)
		if err != nil {
			t.Fatal(err)
		}
		bob, err := s.CreateUser(ctx, "bob", false)
		if err != nil {
			t.Fatal(err)
		}
		phys, err := s.CreateProject(ctx, "physics")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateProject(ctx, "physics"); !errors.Is(err, ErrExists) {
			t.Errorf("physics again: %v, want ErrExists", err)
		}
		chem, err := s.CreateProject(ctx, "chem")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetMember(ctx, phys.ID, alice.ID, "admin"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetMember(ctx, phys.ID, bob.ID, "user"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetMember(ctx, chem.ID, bob.ID, "manager"); err != nil {
			t.Fatal(err)
		}
		if added, err := s.AddMember(ctx, phys.ID, alice.ID, "user"); err != nil || added {
			t.Errorf("AddMember of a member: %v %v, want false (the role stays)", added, err)
		}
		type row struct{ P, U, R string }
		rows := func(pid, uid int64) []row {
			ms, err := s.ListMembers(ctx, pid, uid)
			if err != nil {
				t.Fatal(err)
			}
			var out []row
			for _, m := range ms {
				out = append(out, row{m.Project, m.User, m.Role})
			}
			return out
		}
		if d := cmp.Diff([]row{{"chem", "bob", "manager"}, {"physics", "alice", "admin"}, {"physics", "bob", "user"}}, rows(0, 0)); d != "" {
			t.Errorf("every membership (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]row{{"chem", "bob", "manager"}, {"physics", "bob", "user"}}, rows(0, bob.ID)); d != "" {
			t.Errorf("bob's (-want +got):\n%s", d)
		}
		if err := s.SetMember(ctx, phys.ID, bob.ID, "manager"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveMember(ctx, phys.ID, alice.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveMember(ctx, phys.ID, alice.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("removing a non-member: %v, want ErrNotFound", err)
		}
		if d := cmp.Diff([]row{{"physics", "bob", "manager"}}, rows(phys.ID, 0)); d != "" {
			t.Errorf("physics' (-want +got):\n%s", d)
		}
		if err := s.DeleteProject(ctx, "physics"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ProjectByName(ctx, "physics"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a deleted project: %v, want ErrNotFound", err)
		}
		if n, err := s.ProjectName(ctx, phys.ID); err != nil || n != "physics" {
			t.Errorf("a deleted project's name (its runs name it): %q %v", n, err)
		}
		if err := s.DeleteProject(ctx, "physics"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting it again: %v, want ErrNotFound", err)
		}
		again, err := s.CreateProject(ctx, "physics")
		if err != nil || again.ID != phys.ID {
			t.Fatalf("physics made again: %+v %v, want its old ID %d", again, err, phys.ID)
		}
		if got := rows(phys.ID, 0); len(got) != 0 {
			t.Errorf("a project made again has no members, got %v", got)
		}
		ps, err := s.ListProjects(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		if d := cmp.Diff([]string{"chem", "physics"}, names); d != "" {
			t.Errorf("projects (-want +got):\n%s", d)
		}
		// A deleted user's memberships are not listed.
		if err := s.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if got := rows(0, 0); len(got) != 0 {
			t.Errorf("memberships after bob's deletion: %v", got)
		}
	})
}

// The runs a user may see: those of their projects and their own.
func TestListRunsVisible(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		s := open()
		var pid [4]int64
		var uid [3]int64
		for i := 1; i <= 3; i++ {
			p, err := s.CreateProject(ctx, fmt.Sprintf("p%d", i))
			if err != nil {
				t.Fatal(err)
			}
			pid[i] = p.ID
		}
		for i := 1; i <= 2; i++ {
			u, err := s.CreateUser(ctx, fmt.Sprintf("u%d", i), false)
			if err != nil {
				t.Fatal(err)
			}
			uid[i] = u.ID
		}
		b := &Batch{}
		for i, r := range []struct{ p, u int }{{1, 1}, {1, 2}, {2, 2}, {3, 1}} {
			name := "r"
			if i == 2 {
				name = "svc"
			}
			b.Runs = append(b.Runs, &Run{ID: int64(i + 1), ProjectID: pid[r.p], UserID: uid[r.u], Name: name, Status: "submitted", Spec: []byte("{}")})
		}
		if err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		ids := func(f RunFilter) []int64 {
			rs, err := s.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []int64
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		if d := cmp.Diff([]int64{3, 2, 1}, ids(RunFilter{Visible: []int64{pid[1]}, VisibleUser: uid[2]})); d != "" {
			t.Errorf("project 1 and user 2's (-want +got):\n%s", d)
		}
		if got := ids(RunFilter{Visible: []int64{}, VisibleUser: uid[0]}); len(got) != 0 {
			t.Errorf("no project and no user: %v, want none", got)
		}
		if d := cmp.Diff([]int64{4, 1}, ids(RunFilter{OnlyUser: uid[1]})); d != "" {
			t.Errorf("user 1's (-want +got):\n%s", d)
		}
		// By name, as a service's reconciler finds its replicas.
		if d := cmp.Diff([]int64{3}, ids(RunFilter{ProjectID: pid[2], Name: "svc"})); d != "" {
			t.Errorf("project 2's svc (-want +got):\n%s", d)
		}
		if got := ids(RunFilter{ProjectID: pid[1], Name: "svc"}); len(got) != 0 {
			t.Errorf("project 1's svc: %v, want none", got)
		}
	})
}

// Upgrading a database of 00010 (one project, main, where every run went)
// makes every live user a member of main, as a user.
func TestMigrationMembersOfMain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Sub(sqliteMigrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, sub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO projects (name, created_at) VALUES ('main', 1)`,
		`INSERT INTO users (name, admin, created_at) VALUES ('admin', 1, 1), ('alice', 0, 2), ('gone', 0, 3)`,
		`UPDATE users SET deleted_at = 4 WHERE name = 'gone'`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s := openTest(t, path)
	ms, err := s.ListMembers(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Project+"/"+m.User+"/"+m.Role)
	}
	if d := cmp.Diff([]string{"main/admin/user", "main/alice/user"}, got); d != "" {
		t.Errorf("members after the upgrade (-want +got):\n%s", d)
	}
	var deleted int
	if err := s.w.QueryRowContext(ctx, `SELECT COUNT(*) FROM project_members m JOIN users u ON u.id = m.user_id WHERE u.name = 'gone'`).Scan(&deleted); err != nil || deleted != 0 {
		t.Errorf("a deleted user made a member: %d %v", deleted, err)
	}
}
