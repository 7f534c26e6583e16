package store

import (
	"bytes"
	"context"
	"errors"
	"testing"
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
