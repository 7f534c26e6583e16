package server

import (
	"time"

	"github.com/berth-hq/berth/internal/control"
)

// tick is the scheduling loop's clockwork (onTick), queued without waiting.
func (s *Server) tick() time.Time {
	next, err := s.do(control.TickInput{})
	if err != nil {
		return time.Time{}
	}
	return next.(time.Time)
}
