package cli

import (
	"io"
	"sync"

	"github.com/berth-hq/berth/internal/spec"
)

// sizeValue is a size flag, read as configurations read sizes ("64MB").
type sizeValue struct{ b *int64 }

func (v sizeValue) String() string {
	if v.b == nil || *v.b == 0 {
		return ""
	}
	return spec.Bytes(*v.b).String()
}

func (v sizeValue) Set(s string) error {
	b, err := spec.ParseBytes(s)
	if err != nil {
		return err
	}
	*v.b = int64(b)
	return nil
}

func (v sizeValue) Type() string { return "size" }

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
