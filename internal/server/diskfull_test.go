package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// With its database's disk full, the server stays up: a submission is
// refused with 503 (Retry-After) and a clear reason, reads go on, and once
// there is room again the change that failed is written, submissions are
// taken, a retry with the same Idempotency-Key gets the run the refused
// submission made, and after a restart everything acknowledged is there.
func TestDatabaseDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	if os.Getenv("BERTH_TEST_DB") == "postgres" {
		t.Skip("the database is PostgreSQL's, not on this tmpfs")
	}
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "berth-test-full", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	h := newHarness(t, dir)
	ctx := context.Background()
	for range 3 {
		if _, err := h.c.Submit(ctx, api.SubmitRequest{Spec: task(t, "type: task\ncommands: [\"true\"]\n"), Hold: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Fill the disk.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	body := `{"spec":{"name":"during","commands":["true"]},"hold":true}`
	code, b, hdr := sendFull(t, h, testToken, "/api/v1/runs", body, "Idempotency-Key", "k-during")
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(string(b), "the database cannot be written") {
		t.Fatalf("a submission on a full disk: %d %s (Retry-After %q)", code, b, hdr.Get("Retry-After"))
	}
	if code, b, _ := sendFull(t, h, testToken, "/api/v1/runs", `{"spec":{"commands":["true"]},"hold":true}`); code != http.StatusServiceUnavailable {
		t.Errorf("the next submission: %d %s", code, b)
	}
	if runs, err := h.c.Runs(ctx, client.ListOptions{All: true}); err != nil || len(runs) < 3 {
		t.Errorf("listing while full: %d runs, %v", len(runs), err)
	}
	// Room again: the refused submission's run is written, and new ones
	// are taken.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, b, _ = sendFull(t, h, testToken, "/api/v1/runs", `{"spec":{"name":"after","commands":["true"]},"hold":true}`)
		if code == http.StatusCreated || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code != http.StatusCreated {
		t.Fatalf("a submission once there is room: %d %s", code, b)
	}
	code, b, _ = sendFull(t, h, testToken, "/api/v1/runs", body, "Idempotency-Key", "k-during")
	var again api.Run
	if err := json.Unmarshal(b, &again); err != nil || code/100 != 2 || again.Name != "during" {
		t.Fatalf("the retry of the refused submission: %d %s", code, b)
	}
	addr := h.http.Listener.Addr().String()
	h.close()
	h = newHarnessAt(t, dir, addr)
	runs, err := h.c.Runs(ctx, client.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, r := range runs {
		names[r.Name]++
	}
	if len(runs) != 5 || names["during"] != 1 || names["after"] != 1 {
		t.Errorf("after a restart: %d runs %v, want the 3 before, the refused one once, the one after", len(runs), names)
	}
}
