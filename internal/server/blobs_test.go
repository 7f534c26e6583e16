package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// Blobs: a submission naming an archive the server lacks is refused; once
// uploaded (a body whose SHA-256 is not its name is refused, one over the
// limit too), the run's own credential fetches it through the run, and
// not a blob the run does not name, nor through another run.
func TestRunBlobs(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.MaxUploadBytes = 1 << 10 })
	ctx := context.Background()
	data := []byte("an archive, as far as the server cares")
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	withRepo := func() *spec.Task {
		tk := task(t, "type: task\nrepos: [.]\ncommands: [\"true\"]\n")
		tk.Repos[0].Archive = &spec.Archive{Digest: d, Size: int64(len(data)), Dest: "."}
		return tk
	}

	_, err := h.c.Submit(ctx, api.SubmitRequest{Spec: withRepo(), Hold: true})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "not on the server") {
		t.Fatalf("submit before the upload: %v, want 400 not on the server", err)
	}
	if _, ok, err := h.c.HasBlob(ctx, d); ok || err != nil {
		t.Fatalf("HasBlob before the upload = %v, %v", ok, err)
	}
	if err := h.c.PutBlob(ctx, d, []byte("something else")); err == nil || !strings.Contains(err.Error(), "changed on the way") {
		t.Fatalf("PutBlob of other bytes: %v", err)
	}
	big := bytes.Repeat([]byte("x"), 2<<10)
	bs := sha256.Sum256(big)
	if err := h.c.PutBlob(ctx, hex.EncodeToString(bs[:]), big); err == nil || !strings.Contains(err.Error(), "the most this server takes") {
		t.Fatalf("PutBlob over the limit: %v", err)
	}
	if err := h.c.PutBlob(ctx, d, data); err != nil {
		t.Fatal(err)
	}
	if b, ok, err := h.c.HasBlob(ctx, d); !ok || err != nil || b.Size != int64(len(data)) || b.MaxSize != 1<<10 {
		t.Fatalf("HasBlob after the upload = %+v, %v, %v", b, ok, err)
	}

	mine, err := h.c.Submit(ctx, api.SubmitRequest{Spec: withRepo(), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	job := h.c.WithToken(h.srv.jobToken(mine.ID))
	var got bytes.Buffer
	if err := job.RunBlob(ctx, strconv.FormatInt(mine.ID, 10), d, &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("RunBlob with the run's credential: %q, %v", got.String(), err)
	}
	if err := job.RunBlob(ctx, strconv.FormatInt(plain.ID, 10), d, &got); err == nil {
		t.Error("run 1's credential fetched through run 2")
	}
	if err := h.c.RunBlob(ctx, strconv.FormatInt(plain.ID, 10), d, &got); err == nil || !strings.Contains(err.Error(), "carries no archive") {
		t.Errorf("a blob through a run that does not name it: %v", err)
	}
}
