package roles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/store"
)

// Replicas (issue 19; docs/design.md, "Replicas"): several `berth server
// --replica` on one PostgreSQL database. One leads: it holds the lease (a
// session advisory lock) and the fencing epoch, and runs as a lone
// server does. The others follow: they serve the API by forwarding every
// request to the leader, whose URL they read from the database, and poll
// the lease every second; the one that gets it waits --takeover-delay
// (the deposed leader notices its loss sooner, see leaseCheck), takes
// the epoch, and starts as a server restarting does, from the store.

// replicaFlags are berth server's flags for replicas.
type replicaFlags struct {
	on            bool
	advertise     string
	takeoverDelay time.Duration
}

func (f *replicaFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.on, "replica", false, "one of several servers on one PostgreSQL database (--db postgres://…): the one holding the lease leads, the others forward to it and take over when it goes (docs/operations.md)")
	fl.StringVar(&f.advertise, "advertise-url", "", "with --replica: the URL the other replicas, agents and clients reach this one at (default http:// and the --listen address)")
	fl.DurationVar(&f.takeoverDelay, "takeover-delay", 2*time.Second, "with --replica: how long a replica that got the lease waits before it leads; longer than the leader's lease check (0.5 s, 1 s deadline), so a leader cut off from the database has stopped")
}

// Lease checks: a leader checks its lease every leasePing, each check
// failing after leaseDeadline; both together stay below the takeover
// delay's default.
const (
	leasePing     = 500 * time.Millisecond
	leaseDeadline = time.Second
	followerPoll  = time.Second
)

// replica is a server process among replicas: its listener serves the
// follower's proxy until it leads, then the server's handler.
type replica struct {
	st      *store.Postgres
	ln      net.Listener
	self    string
	flags   replicaFlags
	log     *slog.Logger
	handler atomic.Value // http.Handler
	leader  atomic.Value // string: the leader's URL as last read
	proxy   *httputil.ReverseProxy
}

// startReplica listens on listen and serves as a follower.
func startReplica(st store.Store, listen string, f replicaFlags, log *slog.Logger) (*replica, error) {
	pg, ok := st.(*store.Postgres)
	if !ok {
		return nil, errors.New("--replica: replicas share a PostgreSQL database: give --db postgres://…")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", listen, err)
	}
	r := &replica{st: pg, ln: ln, flags: f, log: log.With("role", "replica")}
	r.self = f.advertise
	if r.self == "" {
		r.self = "http://" + ln.Addr().String()
	}
	r.leader.Store("")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	r.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := url.Parse(r.leader.Load().(string))
			pr.SetURL(u)
			pr.SetXForwarded() // the leader must not take it for a local client
			pr.Out.Header.Set(headerForwarded, r.self)
		},
		Transport:     tr,
		FlushInterval: -1, // agent streams, log follows
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				// Not sent: the client may send it elsewhere.
				w.Header().Set(client.HeaderRetryOther, "1")
			}
			unavailable(w, fmt.Sprintf("follower %s: the leader at %s: %v", r.self, r.leader.Load(), err))
		},
	}
	r.handler.Store(http.HandlerFunc(r.follow))
	return r, nil
}

// headerForwarded marks a request a follower forwards, so that one is
// never forwarded twice (a stale leader URL naming a follower).
const headerForwarded = "X-Berth-Forwarded-By"

// headerLeader, on a follower's answers, is the leader's URL.
const headerLeader = "X-Berth-Leader"

func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(api.Error{Error: msg})
}

// follow is the follower's handler: everything goes to the leader.
func (r *replica) follow(w http.ResponseWriter, req *http.Request) {
	leader := r.leader.Load().(string)
	if leader == "" || leader == r.self || req.Header.Get(headerForwarded) != "" {
		w.Header().Set(client.HeaderRetryOther, "1")
		unavailable(w, fmt.Sprintf("follower %s: no leader yet: retry", r.self))
		return
	}
	w.Header().Set(headerLeader, leader)
	r.proxy.ServeHTTP(w, req)
}

// ServeHTTP serves the follower's or the leader's handler.
func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.handler.Load().(http.Handler).ServeHTTP(w, req)
}

// waitLead follows until this replica holds the lease, then takes the
// lead: it waits the takeover delay and increments the epoch, which
// fences every batch of the store from now on. It returns the epoch.
func (r *replica) waitLead(ctx context.Context) (int64, error) {
	r.log.Info("replica following", "url", r.self)
	for {
		ok, err := r.st.TryLease(ctx)
		if err != nil {
			r.log.Warn("lease: the database cannot be reached", "err", err)
		}
		if ok {
			break
		}
		if _, u, err := r.st.Leader(ctx); err == nil && u != r.leader.Load() {
			r.log.Info("following the leader", "leader", u)
			r.leader.Store(u)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(followerPoll):
		}
	}
	// No replica ever led (epoch 0): nothing to wait for.
	delay := r.flags.takeoverDelay
	if e, _, err := r.st.Leader(ctx); err == nil && e == 0 {
		delay = 0
	}
	r.log.Info("lease taken; taking over after the delay", "delay", delay)
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(delay):
	}
	epoch, err := r.st.TakeOver(ctx, r.self)
	if err != nil {
		return 0, err
	}
	r.log.Info("leading", "epoch", epoch, "url", r.self)
	return epoch, nil
}

// lead serves h (the server's API) from now on.
func (r *replica) lead(h http.Handler) { r.handler.Store(h) }

// leaseCheck checks the lease until ctx ends (nil) or it fails: then the
// lease may pass to another replica, and this one must stop leading at
// once (the caller ends the process; its batches are refused by the
// epoch anyway).
func (r *replica) leaseCheck(ctx context.Context) error {
	t := time.NewTicker(leasePing)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := r.st.PingLease(ctx, leaseDeadline); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("lost the leader lease, stepping down: %w", err)
		}
	}
}
