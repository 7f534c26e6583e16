package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/pack"
	"github.com/berth-hq/berth/internal/spec"
)

// TestProgressLine: the line is redrawn in place, cleared before output
// and drawn again after a whole line of it, never over an unfinished one;
// its end leaves the last text as a line.
func TestProgressLine(t *testing.T) {
	var screen bytes.Buffer
	p := &progressLine{tty: &screen}
	out := p.writer(&screen)
	p.set("1 done")
	p.set("2 done")
	io.WriteString(out, "hello\n")
	io.WriteString(out, "part")
	p.set("3 done") // hidden: "part" is not a line yet
	io.WriteString(out, "ial\n")
	p.end()
	want := eraseLine + "1 done" + eraseLine + "2 done" + eraseLine + "hello\n2 done" + eraseLine + "part" + "ial\n3 done" + eraseLine + "3 done\n"
	if got := screen.String(); got != want {
		t.Errorf("screen:\n%q\nwant:\n%q", got, want)
	}
}

// TestArrayProgress: an array's progress is read from the server (its
// own run and its tasks); berth apply shows it on a terminal only.
func TestArrayProgress(t *testing.T) {
	c := testServer(t)
	ctx := context.Background()
	task, err := spec.Parse("arr.yml", []byte("type: task\nname: arr\narray: 1-300\ncommands:\n  - sleep 100\n"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Submit(ctx, api.SubmitRequest{Spec: task})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^array arr: 300 tasks: (\d+) created, \d+ running, 0 done, 0 failed(, (\d+) not created yet)?$`)
	var last string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, err := readArrayProgress(ctx, c, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		last = s
		if m := re.FindStringSubmatch(s); m != nil && m[1] != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress = %q, want some of 300 tasks created", last)
		}
	}

	// Piped: the writers are the ones given, nothing is drawn.
	var o, e bytes.Buffer
	wo, we, stop := arrayProgress(ctx, c, run, task, &o, &e)
	stop()
	if wo != io.Writer(&o) || we != io.Writer(&e) || e.Len() != 0 {
		t.Errorf("piped: progress drawn (%q)", e.String())
	}
	// A terminal: the line, and its summary at the end.
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	t.Cleanup(func() { master.Close(); tty.Close() })
	got := make(chan string)
	go func() { b, _ := io.ReadAll(master); got <- string(b) }()
	_, we, stop = arrayProgress(ctx, c, run, task, tty, tty)
	time.Sleep(2 * arrayProgressEvery)
	io.WriteString(we, "a line of output\n")
	stop()
	tty.Close()
	screen := <-got
	if !strings.Contains(screen, eraseLine+"array arr: 300 tasks:") || !strings.Contains(screen, "a line of output") || !strings.HasSuffix(strings.ReplaceAll(screen, "\r\n", "\n"), "not created yet\n") && !strings.HasSuffix(strings.ReplaceAll(screen, "\r\n", "\n"), "0 failed\n") {
		t.Errorf("terminal:\n%q", screen)
	}
	// A run that is not an array: nothing.
	plain, _ := spec.Parse("p.yml", []byte("type: task\ncommands:\n  - echo\n"))
	if wo, _, stop := arrayProgress(ctx, c, run, plain, tty, tty); wo != io.Writer(tty) {
		t.Error("progress for a run that is not an array")
	} else {
		stop()
	}
}

// TestUploadProgress: an archive's upload shows its bytes sent on a
// terminal, redrawn in place and erased at the end; piped, only the
// lines upload always prints.
func TestUploadProgress(t *testing.T) {
	c := testServer(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	rand.Read(data)
	arc := func(seed byte) []carried {
		d := slices.Clone(data)
		d[0] = seed
		sum := sha256.Sum256(d)
		return []carried{{what: "repo .", arc: &pack.Archive{Data: d, Digest: hex.EncodeToString(sum[:]), Files: 1, Bytes: int64(len(d))}}}
	}
	var piped bytes.Buffer
	if _, err := upload(ctx, c, arc(1), &piped); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(piped.String(), "sent (") || strings.Contains(piped.String(), "\r") {
		t.Errorf("piped upload drew progress:\n%q", piped.String())
	}
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty here: %v", err)
	}
	t.Cleanup(func() { master.Close(); tty.Close() })
	got := make(chan string)
	go func() { b, _ := io.ReadAll(master); got <- string(b) }()
	sent, err := upload(ctx, c, arc(2), tty)
	if err != nil || sent != int64(len(data)) {
		t.Fatalf("upload = %d, %v", sent, err)
	}
	tty.Close()
	screen := <-got
	if !strings.Contains(screen, eraseLine+"repo .: 3.0MB of 3.0MB sent (100%)"+eraseLine) || strings.Count(screen, "sent (") < 2 {
		t.Errorf("terminal upload:\n%q", screen)
	}
}
