package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Version names a policy file's content: the SHA-256 of its bytes, hex. A
// file that does not exist has the empty version, so that a writer who saw
// no file does not overwrite one made since.
func Version(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// ReadFile reads a policy file's text and version; a file that does not
// exist yet reads as no text and the empty version.
func ReadFile(path string) ([]byte, string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("policy: %w", err)
	}
	return data, Version(data), nil
}

// WriteFile replaces the file at path with data so that a reader (or a
// crash) sees the old text or the new, never a part: a temporary file in
// the same directory, synced, renamed over the old one, and the directory
// synced. The file keeps its permissions (new files get 0644).
func WriteFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("policy: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("policy: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("policy: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("policy: sync %s: %w", dir, err)
	}
	return nil
}
