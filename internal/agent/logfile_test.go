package agent

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// frame encodes one frame as the shim writes it.
func frame(stream byte, data string) []byte {
	b := make([]byte, frameHeader+len(data))
	b[0] = stream
	binary.BigEndian.PutUint32(b[4:8], uint32(len(data)))
	binary.BigEndian.PutUint64(b[8:16], uint64(time.Unix(100, 0).UnixNano()))
	copy(b[frameHeader:], data)
	return b
}

// torn is two whole frames and the first bytes of a third, as a shim that
// died or met a full disk in the middle of a write leaves them.
func torn() []byte {
	b := append(frame(1, "hello\n"), frame(2, "oops\n")...)
	return append(b, frame(1, "never finished\n")[:frameHeader+3]...)
}

// A log ending in a torn frame is cut at the end of its last whole frame
// when it is opened again, and the next frame follows that one: every
// frame of the file stays readable.
func TestOpenFramesCutsTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), fileOutput)
	if err := os.WriteFile(path, torn(), 0o600); err != nil {
		t.Fatal(err)
	}
	fw, err := openFrames(path, func() time.Time { return time.Unix(200, 0) })
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.write(1, []byte("again\n")); err != nil {
		t.Fatal(err)
	}
	fw.f.Close()
	got := readAll(t, path)
	if diff := cmp.Diff([]string{"stdout:hello\n", "stderr:oops\n", "stdout:again\n"}, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}

// readAll reads every frame of the log at path, and checks that they end
// where the file does.
func readAll(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	frames, next, err := ReadFrames(f, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := f.Stat(); next != fi.Size() {
		t.Errorf("the frames end at %d, the file at %d", next, fi.Size())
	}
	var out []string
	for _, fr := range frames {
		out = append(out, fr.Stream+":"+string(fr.Data))
	}
	return out
}

// Once a job's shim is done, a torn frame at the end of its output is not
// waited for: the agent sends what is whole, then the job's end, and cuts
// the torn bytes off the file. (It waited for the rest for ever, and the
// run stayed `running`, then `terminating`, whatever anyone did.)
func TestCollectDoesNotWaitForATornFrame(t *testing.T) {
	a := testAgent(t)
	dir := filepath.Join(a.cfg.DataDir, "jobs", "7")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data := torn()
	if err := os.WriteFile(filepath.Join(dir, fileOutput), data, 0o600); err != nil {
		t.Fatal(err)
	}
	whole := int64(len(frame(1, "hello\n")) + len(frame(2, "oops\n")))
	a.mu.Lock()
	a.jobs[7] = &localJob{id: 7, dir: dir, synced: true, startedSent: true, exit: &shimExit{ExitCode: 0, FinishedAt: time.Unix(300, 0)}}
	a.mu.Unlock()

	evs, _ := a.collect()
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+":"+string(e.Data))
	}
	if diff := cmp.Diff([]string{"log:hello\n", "log:oops\n", "exited:"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(dir, fileOutput)); err != nil || fi.Size() != whole {
		t.Errorf("output is %v bytes (%v), want the torn frame cut off at %d", fi.Size(), err, whole)
	}
	// While the shim may still write, a frame being written is waited for.
	if err := os.WriteFile(filepath.Join(dir, fileOutput), data, 0o600); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	j := a.jobs[7]
	j.out.Close()
	j.out, j.exit, j.torn = nil, nil, false
	a.mu.Unlock()
	evs, _ = a.collect()
	for _, e := range evs {
		if e.Type == "exited" {
			t.Errorf("a running job's end was reported: %+v", e)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, fileOutput)); fi.Size() != int64(len(data)) {
		t.Errorf("the output of a running job was cut to %d bytes", fi.Size())
	}
}

// FuzzReadFrames: ReadFrames never panics and never trusts a length; what
// it returns are frames laid end to end from where it started, whose
// encoding is exactly the bytes they came from; it stops at the first
// frame that is torn or corrupt, where wholeFrames (the shim's reopen)
// stops too.
func FuzzReadFrames(f *testing.F) {
	whole := append(frame(1, "hello\n"), frame(2, "oops\n")...)
	f.Add(whole, 0)
	f.Add(torn(), 0)                                          // the torn frame of a full disk
	f.Add(append(whole, frame(1, "x")[:frameHeader-1]...), 0) // a torn header
	f.Add(append(whole, 7, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 'x'), 0)
	f.Add(append(whole, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff), 0) // a length never to trust
	f.Add(torn(), 22)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		frames, next, err := ReadFrames(bytes.NewReader(data), 0, max(budget, 1))
		if next < 0 || next > int64(len(data)) {
			t.Fatalf("next = %d of %d bytes", next, len(data))
		}
		var again []byte
		at, total := int64(0), 0
		for _, fr := range frames {
			total += len(fr.Data)
			if fr.Offset != at {
				t.Fatalf("a frame at %d, want %d", fr.Offset, at)
			}
			if len(fr.Data) > maxFrameData {
				t.Fatalf("a frame of %d bytes", len(fr.Data))
			}
			s := byte(1)
			if fr.Stream == "stderr" {
				s = 2
			}
			enc := frame(s, string(fr.Data))
			binary.BigEndian.PutUint64(enc[8:16], uint64(fr.Time.UnixNano()))
			again = append(again, enc...)
			at += fr.Size()
		}
		if at != next {
			t.Fatalf("frames end at %d, next = %d", at, next)
		}
		if !bytes.Equal(again[:min(len(again), len(data))], data[:len(again)]) {
			t.Fatalf("the frames do not encode the bytes they came from")
		}
		if total >= max(budget, 1) && err == nil {
			return // stopped by the budget: the rest is for the next read
		}
		end, werr := wholeFrames(bytes.NewReader(data), int64(len(data)))
		if werr != nil {
			t.Fatal(werr)
		}
		if end != next {
			t.Fatalf("wholeFrames = %d, ReadFrames stopped at %d (%v)", end, next, err)
		}
	})
}
