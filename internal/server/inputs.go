package server

import "github.com/berth-hq/berth/internal/control"

// do feeds in to the cluster and answers once what it changed is durable
// and its effects are performed.
func (s *Server) do(in control.Input) (any, error) {
	return s.doWith(func() control.Input { return in })
}

// doWith is do with an input made under the lock, from what the cluster
// holds (read, not changed).
func (s *Server) doWith(make func() control.Input) (any, error) {
	reply, done, err := s.queue(make)
	if err != nil {
		return nil, err
	}
	if err := <-done; err != nil {
		return nil, err
	}
	return reply, nil
}

// queue feeds the input make makes and queues what it changed; done
// answers once that is durable.
func (s *Server) queue(make func() control.Input) (reply any, done <-chan error, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return nil, nil, s.broken
	}
	if s.full != nil {
		return nil, nil, s.full
	}
	reply, err = s.Step(s.clock.Now(), make())
	done = s.flushLocked()
	return reply, done, err
}
