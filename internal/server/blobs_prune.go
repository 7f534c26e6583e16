package server

import (
	"context"
	"time"
)

// DefaultBlobRetention keeps an archive a week after its last use.
const DefaultBlobRetention = 7 * 24 * time.Hour

// pruneEvery is how often the server looks for archives no run needs.
const pruneEvery = time.Hour

// blobLoop deletes, every pruneEvery, the uploaded archives that no run
// needs any more (pruneBlobs).
func (s *Server) blobLoop(ctx context.Context) {
	if s.cfg.BlobRetention < 0 {
		return
	}
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.pruneBlobs(ctx, s.clock.Now())
		}
	}
}

// pruneBlobs deletes the archives last used more than the retention
// before now that no unfinished run names, nor one that finished within
// the retention (a run requeued later than that finds its code gone, and
// fails to start saying so).
func (s *Server) pruneBlobs(ctx context.Context, now time.Time) {
	n, bytes, err := s.store.PruneBlobs(ctx, now.Add(-s.cfg.BlobRetention))
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("old archives not deleted", "err", err)
	case n > 0:
		s.log.Info("deleted archives no run needs", "archives", n, "bytes", bytes, "retention", s.cfg.BlobRetention)
	}
}
