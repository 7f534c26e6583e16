package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A job's output is one file of frames, written by its shim and read by the
// agent. Keeping stdout and stderr in one file keeps their relative order as
// the shim saw it; the frame's offset in the file is its identity, so that a
// restarted agent resends from the server's last acknowledged offset and the
// server drops what it already has.
//
// Frame layout: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4 bytes
// big-endian data length, 8 bytes big-endian Unix nanoseconds, then the data.
const frameHeader = 16

// maxFrameData bounds one frame, so a reader never trusts a huge length.
const maxFrameData = 1 << 20

// Frame is one write of a job's stdout or stderr.
type Frame struct {
	Offset int64
	Stream string
	Time   time.Time
	Data   []byte
}

// Size is the frame's length in the file.
func (f Frame) Size() int64 { return frameHeader + int64(len(f.Data)) }

var errBadFrame = errors.New("agent: corrupt log frame")

// frameWriter appends frames to a log file; safe for concurrent use.
//
// A write that fails (ENOSPC: the node's disk is full) must neither stop
// the job nor spoil the file: the frame it cut short is truncated away,
// the output is dropped and counted, and the next write that succeeds is
// preceded by a line that says how much was lost. The job's pipe is
// drained all along: a job blocked on its output would never end.
type frameWriter struct {
	mu  sync.Mutex
	f   *os.File
	now func() time.Time
	// end is where the last whole frame ends: the file's size, unless a
	// write failed and its frame could not be truncated away (broken).
	end    int64
	broken bool
	// lost counts the bytes dropped since the last frame written, err is
	// the first failure of that loss; total counts every byte dropped.
	lost  int64
	err   error
	total int64
}

// openFrames opens the log file at path for appending, creating it; a
// frame left half-written (by a shim that died, or by a full disk that
// also refused the truncation) is cut off, so that the next frame starts
// where a reader expects one.
func openFrames(path string, now func() time.Time) (*frameWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	end := int64(0)
	if fi.Size() > 0 {
		r, err := os.Open(path)
		if err != nil {
			f.Close()
			return nil, err
		}
		end, err = wholeFrames(r, fi.Size())
		r.Close()
		if err == nil && end < fi.Size() {
			err = f.Truncate(end)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("agent: %s: cut a torn frame: %w", path, err)
		}
	}
	return &frameWriter{f: f, now: now, end: end}, nil
}

// write appends data as frames of stream. On failure the data is dropped
// and counted, and the error returned: the caller goes on.
func (w *frameWriter) write(stream byte, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost > 0 {
		if err := w.resumeLocked(); err != nil {
			w.lost += int64(len(data))
			w.total += int64(len(data))
			return err
		}
	}
	for len(data) > 0 {
		n := min(len(data), maxFrameData)
		if err := w.frameLocked(stream, data[:n]); err != nil {
			w.lost += int64(len(data))
			w.total += int64(len(data))
			if w.err == nil {
				w.err = err
			}
			return err
		}
		data = data[n:]
	}
	return nil
}

// flush writes the line about lost output, if any is owed; lost is what
// stays unsaid (0 once the line is written).
func (w *frameWriter) flush() (lost int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost == 0 {
		return 0, nil
	}
	if err := w.resumeLocked(); err != nil {
		return w.lost, w.err
	}
	return 0, nil
}

// resumeRoom is the free room from which a writer that lost output tries
// again. Less, and each try would fail, or succeed with a line about the
// loss and fail again, spending the last room on such lines.
const resumeRoom = 64 << 10

// resumeLocked writes the line about the output lost, once the disk has
// resumeRoom free again.
func (w *frameWriter) resumeLocked() error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(w.f.Fd()), &st); err == nil && int64(st.Bavail)*st.Bsize < resumeRoom {
		return w.err
	}
	if err := w.frameLocked(2, []byte(w.lostLine())); err != nil {
		return err
	}
	w.lost, w.err = 0, nil
	return nil
}

// dropped counts every byte of output dropped.
func (w *frameWriter) dropped() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

// lostLine is the line said in place of lost output.
func (w *frameWriter) lostLine() string {
	return fmt.Sprintf("berth: %d bytes of output lost: %v\n", w.lost, w.err)
}

// frameLocked writes one frame whole, or nothing: a write cut short is
// truncated away. Once that fails too the file ends in a torn frame, and
// nothing more is written to it (a reader stops there).
func (w *frameWriter) frameLocked(stream byte, data []byte) error {
	if w.broken {
		return errors.New("the job's output file ends in a frame that could not be completed")
	}
	buf := make([]byte, frameHeader+len(data))
	buf[0] = stream
	binary.BigEndian.PutUint32(buf[4:8], uint32(len(data)))
	binary.BigEndian.PutUint64(buf[8:16], uint64(w.now().UnixNano()))
	copy(buf[frameHeader:], data)
	n, err := w.f.Write(buf)
	if err == nil {
		w.end += int64(n)
		return nil
	}
	if n > 0 {
		if terr := w.f.Truncate(w.end); terr != nil {
			w.broken = true
		}
	}
	return err
}

// streamWriter is an io.Writer for one stream of a frameWriter. It never
// fails: what cannot be written is dropped and counted (see frameWriter),
// so that whoever copies into it keeps reading.
type streamWriter struct {
	w      *frameWriter
	stream byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	_ = s.w.write(s.stream, p)
	return len(p), nil
}

// ReadFrames reads whole frames from off on, up to about maxBytes of data;
// next is where the following read starts. A frame still being written is left
// for the next call.
func ReadFrames(r io.ReaderAt, off int64, maxBytes int) (frames []Frame, next int64, err error) {
	next = off
	hdr := make([]byte, frameHeader)
	total := 0
	for total < maxBytes {
		if _, err := r.ReadAt(hdr, next); err != nil {
			if errors.Is(err, io.EOF) {
				return frames, next, nil
			}
			return frames, next, fmt.Errorf("agent: read log: %w", err)
		}
		n, ok := frameLength(hdr)
		if !ok {
			return frames, next, fmt.Errorf("%w at offset %d", errBadFrame, next)
		}
		data := make([]byte, n)
		if _, err := r.ReadAt(data, next+frameHeader); err != nil && n > 0 {
			if errors.Is(err, io.EOF) {
				return frames, next, nil
			}
			return frames, next, fmt.Errorf("agent: read log: %w", err)
		}
		stream := "stdout"
		if hdr[0] == 2 {
			stream = "stderr"
		}
		frames = append(frames, Frame{Offset: next, Stream: stream, Time: time.Unix(0, int64(binary.BigEndian.Uint64(hdr[8:16]))).UTC(), Data: data})
		next += frameHeader + int64(n)
		total += int(n)
	}
	return frames, next, nil
}

// wholeFrames is the end of the last whole frame of a log of size bytes:
// size itself unless the log ends in a torn frame (or a corrupt one).
func wholeFrames(r io.ReaderAt, size int64) (int64, error) {
	hdr := make([]byte, frameHeader)
	off := int64(0)
	for off+frameHeader <= size {
		if _, err := r.ReadAt(hdr, off); err != nil {
			return off, fmt.Errorf("agent: read log: %w", err)
		}
		n, ok := frameLength(hdr)
		if !ok || off+frameHeader+int64(n) > size {
			break
		}
		off += frameHeader + int64(n)
	}
	return off, nil
}

// frameLength reads a frame's header: its data length, and whether it is a
// header at all (stream 1 or 2, three zero bytes, a length a writer could
// have written).
func frameLength(hdr []byte) (uint32, bool) {
	n := binary.BigEndian.Uint32(hdr[4:8])
	ok := (hdr[0] == 1 || hdr[0] == 2) && hdr[1] == 0 && hdr[2] == 0 && hdr[3] == 0 && n <= maxFrameData
	return n, ok
}

// cutTornTail cuts the end of j's output from off on (size bytes in all):
// a frame its shim could not finish, which no reader could ever read. The
// file stays readable (a restarted agent reads it again), and the node's
// disk is checked at once: a full one is the usual cause.
func (a *Agent) cutTornTail(j *localJob, off, size int64) {
	a.log.Warn("job output ends in a frame its shim could not finish; dropped", "job_id", j.id, "offset", off, "bytes", size-off)
	if err := os.Truncate(filepath.Join(j.dir, fileOutput), off); err != nil {
		a.log.Warn("cut the torn end of a job's output", "job_id", j.id, "err", err)
	}
	a.checkDiskSoon()
}
