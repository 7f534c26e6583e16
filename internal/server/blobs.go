package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Blobs are the archives of a run's repo and files (issue 16). berth apply
// packs them, asks whether the server has each digest (GET /blobs/D), and
// sends only those it lacks (PUT /blobs/D); a submission naming a digest
// the server does not hold is refused. A node fetches them through the
// run (GET /runs/R/blobs/D, with the run's job credential): a blob is
// read only as part of a run that names it, by those who may read that
// run's logs.

// DefaultMaxUpload bounds one archive unless the server says otherwise;
// berth apply refuses a larger tree before sending it.
const DefaultMaxUpload = 100 << 20

// blobDigest reads and checks the {digest} of the path.
func blobDigest(r *http.Request) (string, error) {
	d := r.PathValue("digest")
	if !spec.ValidDigest(d) {
		return "", fmt.Errorf("%w: digest %q: want the lowercase hex SHA-256 of the archive", ErrInvalid, d)
	}
	return d, nil
}

func (s *Server) handleBlobHas(w http.ResponseWriter, r *http.Request, _ *store.User) {
	d, err := blobDigest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	size, ok, err := s.store.HasBlob(r.Context(), d)
	if err == nil && !ok {
		err = fmt.Errorf("%w: blob %s", ErrNotFound, d)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Blob{Digest: d, Size: size, MaxSize: s.cfg.MaxUploadBytes})
}

func (s *Server) handleBlobPut(w http.ResponseWriter, r *http.Request, _ *store.User) {
	d, err := blobDigest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, fmt.Errorf("%w: the archive is over %d bytes, the most this server takes (berth server --max-upload)", ErrInvalid, s.cfg.MaxUploadBytes))
		return
	}
	if err != nil {
		writeError(w, fmt.Errorf("%w: read the archive: %v", ErrInvalid, err))
		return
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != d {
		writeError(w, fmt.Errorf("%w: the archive's SHA-256 is %x, not %s: it was changed on the way", ErrInvalid, sum, d))
		return
	}
	if err := s.store.PutBlob(r.Context(), d, data); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Blob{Digest: d, Size: int64(len(data)), MaxSize: s.cfg.MaxUploadBytes})
}

// handleRunBlob serves a blob the run names to those who may read its
// logs (its node, with the run's credential): never one it does not name.
func (s *Server) handleRunBlob(w http.ResponseWriter, r *http.Request, u *store.User) {
	run, err := s.findRun(r.Context(), u, r.PathValue("ref"))
	if err == nil {
		err = s.mayLog(u, run)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := blobDigest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var t spec.Task
	if err := json.Unmarshal(run.Spec, &t); err != nil {
		writeError(w, fmt.Errorf("server: run %d: %w", run.ID, err))
		return
	}
	if !slices.ContainsFunc(t.Archives(), func(a spec.Archive) bool { return a.Digest == d }) {
		writeError(w, fmt.Errorf("%w: run %d carries no archive %s", ErrNotFound, run.ID, d))
		return
	}
	data, err := s.store.GetBlob(r.Context(), d)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// checkArchives refuses a submission that names an archive the server
// does not hold (the client uploads before it submits).
func (s *Server) checkArchives(r *http.Request, t *spec.Task) error {
	for _, a := range t.Archives() {
		_, ok, err := s.store.HasBlob(r.Context(), a.Digest)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: archive %s is not on the server: berth apply uploads it before submitting", ErrInvalid, a.Digest)
		}
	}
	return nil
}
