package store

import (
	"context"
	"errors"
	"testing"
)

func TestSSHKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, open func() Store) {
		ctx := context.Background()
		st := open()
		db := st.(interface {
			AddSSHKey(context.Context, *SSHKey) error
			ListSSHKeys(context.Context, int64) ([]*SSHKey, error)
			SSHKeyByFingerprint(context.Context, string) (*SSHKey, error)
			RemoveSSHKey(context.Context, int64, string) error
		})
		ann, err := st.CreateUser(ctx, "ann", false)
		if err != nil {
			t.Fatal(err)
		}
		bob, err := st.CreateUser(ctx, "bob", false)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.AddSSHKey(ctx, &SSHKey{Fingerprint: "SHA256:a", UserID: ann.ID, PublicKey: "ssh-ed25519 AAAA", Comment: "ann@laptop"}); err != nil {
			t.Fatal(err)
		}
		if err := db.AddSSHKey(ctx, &SSHKey{Fingerprint: "SHA256:a", UserID: bob.ID, PublicKey: "ssh-ed25519 AAAA"}); !errors.Is(err, ErrExists) {
			t.Errorf("the same key for another user: %v, want ErrExists", err)
		}
		if err := db.AddSSHKey(ctx, &SSHKey{Fingerprint: "SHA256:b", UserID: bob.ID, PublicKey: "ssh-ed25519 BBBB"}); err != nil {
			t.Fatal(err)
		}
		k, err := db.SSHKeyByFingerprint(ctx, "SHA256:a")
		if err != nil || k.User != "ann" || k.UserID != ann.ID || k.PublicKey != "ssh-ed25519 AAAA" || k.Comment != "ann@laptop" {
			t.Errorf("SSHKeyByFingerprint: %+v, %v", k, err)
		}
		mine, err := db.ListSSHKeys(ctx, ann.ID)
		if err != nil || len(mine) != 1 || mine[0].Fingerprint != "SHA256:a" {
			t.Errorf("ann's keys: %+v, %v", mine, err)
		}
		if all, err := db.ListSSHKeys(ctx, 0); err != nil || len(all) != 2 {
			t.Errorf("all keys: %+v, %v", all, err)
		}
		if err := db.RemoveSSHKey(ctx, ann.ID, "SHA256:b"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ann removes bob's key: %v, want ErrNotFound", err)
		}
		if err := db.RemoveSSHKey(ctx, ann.ID, "SHA256:a"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SSHKeyByFingerprint(ctx, "SHA256:a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a removed key: %v, want ErrNotFound", err)
		}
		// A deleted user's keys let nobody in.
		if err := st.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SSHKeyByFingerprint(ctx, "SHA256:b"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a deleted user's key: %v, want ErrNotFound", err)
		}
	})
}
