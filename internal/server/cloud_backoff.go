package server

import (
	"time"
)

// A backend fleet whose instances cannot be created (the provider refuses,
// its image is missing, a quota is reached) is not asked again at every
// autoscale: after a failure it waits 1 s, then 2 s, 4 s… up to
// maxCreateBackoff before the next creation, and a success starts over.
// The failure is logged once per distinct message, and the last one is
// shown by `berth fleet` (api.Fleet.LastError) and the dashboard until a
// creation succeeds. The state is the autoscaler's memory: a restarted
// server tries again at once.

// maxCreateBackoff caps the wait between failed creations.
const maxCreateBackoff = 5 * time.Minute

// createFailure is a fleet's run of failed creations.
type createFailure struct {
	n     int       // failures in a row
	err   string    // the last one's message
	at    time.Time // when it failed
	until time.Time // no creation before then
}

// backoffDelay is the wait after n failures in a row (n ≥ 1).
func backoffDelay(n int) time.Duration {
	if n > 20 {
		return maxCreateBackoff
	}
	return min(time.Second<<(n-1), maxCreateBackoff)
}

// noteCreate records the outcome of one creation for fleet at now and
// answers whether the failure is news (a message not seen last time),
// to be logged at warning level; err nil is a success and clears the
// fleet's failures. A failure while the fleet already waits (a sibling
// creation of the same look failed) changes the message, not the wait.
func (c *cloudState) noteCreate(fleet string, err error, now time.Time) (news bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.fails, fleet)
		return false
	}
	if c.fails == nil {
		c.fails = map[string]*createFailure{}
	}
	f := c.fails[fleet]
	if f == nil {
		f = &createFailure{}
		c.fails[fleet] = f
	}
	news = f.err != err.Error()
	f.err, f.at = err.Error(), now
	if now.Before(f.until) {
		return news
	}
	f.n++
	f.until = now.Add(backoffDelay(f.n))
	return news
}

// backingOff tells whether fleet must not create instances at now.
func (c *cloudState) backingOff(fleet string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.fails[fleet]
	return f != nil && now.Before(f.until)
}

// lastError is fleet's last creation failure, for `berth fleet` ("" none
// since the last success).
func (c *cloudState) lastError(fleet string) (msg string, at, retry time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.fails[fleet]; f != nil {
		return f.err, f.at, f.until
	}
	return "", time.Time{}, time.Time{}
}

// pend counts a creation of fleet started and not yet recorded; unpend
// ends it (cloud.go).
func (c *cloudState) pend(fleet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unrecorded == nil {
		c.unrecorded = map[string]int{}
	}
	c.unrecorded[fleet]++
}

func (c *cloudState) unpend(fleet string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unrecorded[fleet]--; c.unrecorded[fleet] <= 0 {
		delete(c.unrecorded, fleet)
	}
}
