package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
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
type frameWriter struct {
	mu  sync.Mutex
	f   *os.File
	now func() time.Time
}

func (w *frameWriter) write(stream byte, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), maxFrameData)
		buf := make([]byte, frameHeader+n)
		buf[0] = stream
		binary.BigEndian.PutUint32(buf[4:8], uint32(n))
		binary.BigEndian.PutUint64(buf[8:16], uint64(w.now().UnixNano()))
		copy(buf[frameHeader:], data[:n])
		w.mu.Lock()
		_, err := w.f.Write(buf)
		w.mu.Unlock()
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// streamWriter is an io.Writer for one stream of a frameWriter.
type streamWriter struct {
	w      *frameWriter
	stream byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	if err := s.w.write(s.stream, p); err != nil {
		return 0, err
	}
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
		n := binary.BigEndian.Uint32(hdr[4:8])
		if (hdr[0] != 1 && hdr[0] != 2) || n > maxFrameData {
			return frames, next, fmt.Errorf("%w at offset %d", errBadFrame, next)
		}
		data := make([]byte, n)
		if _, err := r.ReadAt(data, next+frameHeader); err != nil {
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
