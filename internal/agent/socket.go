package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// The local socket is Berth's munge: a client on this host with no token
// connects to it; the kernel tells the agent who the caller is
// (SO_PEERCRED), and the agent passes the request on to the server with
// its node's credential and the caller's login (api.HeaderUser). The
// server believes it only from a node's credential made to assert users.
// Nothing is set up per user, and no key is shared between hosts.

// peer is who is at the other end of a socket connection.
type peer struct {
	uid, gid uint32
	login    string
	err      error
}

type peerKey struct{}

// peerOf reads the connection's peer credentials and the login of its UID.
func peerOf(c net.Conn) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{err: errors.New("not a Unix socket")}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{err: err}
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil || err != nil {
		return peer{err: fmt.Errorf("peer credentials: %v", errors.Join(cerr, err))}
	}
	p := peer{uid: cred.Uid, gid: cred.Gid}
	u, err := user.LookupId(strconv.FormatUint(uint64(cred.Uid), 10))
	if err != nil {
		p.err = fmt.Errorf("UID %d has no login on this host: %v", cred.Uid, err)
		return p
	}
	p.login = u.Username
	return p
}

// socketHandler passes a local client's request on to the server as the
// node, vouching for the caller's login.
func (a *Agent) socketHandler() (http.Handler, error) {
	// Several replicas' URLs: the first is named, the transport fails
	// over to the others (client.Failover).
	urls := client.SplitURLs(a.cfg.Server)
	target, err := url.Parse(firstURL(a.cfg.Server))
	if err != nil {
		return nil, fmt.Errorf("agent: server URL: %w", err)
	}
	tr0 := http.DefaultTransport.(*http.Transport).Clone()
	tr0.Proxy = nil
	tr := client.Failover(urls, tr0)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			p := pr.In.Context().Value(peerKey{}).(peer)
			// Whatever the caller sent as credentials is dropped: the
			// node vouches for who the kernel says it is, nothing else.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set("Authorization", "Bearer "+a.cfg.Token)
			pr.Out.Header.Set(api.HeaderUser, p.login)
			pr.Out.Header.Set(api.HeaderUID, strconv.FormatUint(uint64(p.uid), 10))
		},
		Transport:     tr,
		FlushInterval: -1, // log follows and the agent's own streams are read as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeSocketError(w, http.StatusBadGateway, fmt.Sprintf("agent %s: the server at %s: %v", a.cfg.Name, a.cfg.Server, err))
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.Context().Value(peerKey{}).(peer)
		if p.err != nil {
			writeSocketError(w, http.StatusForbidden, "agent "+a.cfg.Name+": "+p.err.Error())
			return
		}
		rp.ServeHTTP(w, r)
	}), nil
}

func writeSocketError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"error\":%q}\n", msg)
}

// listenSocket listens at path, mode 0666 (any local user may connect:
// the socket tells the agent who they are). A socket left by a dead agent
// is replaced; one a live agent answers on is not.
func listenSocket(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another agent listens there (give this one --socket PATH)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// serveSocket serves the local socket until ctx is done. A socket that
// cannot be made (no right to /run/berth, another agent there) is logged
// and left off: the agent runs jobs without it.
func (a *Agent) serveSocket(ctx context.Context) {
	path := a.cfg.Socket
	if path == "" || path == "none" {
		return
	}
	h, err := a.socketHandler()
	if err != nil {
		a.log.Warn("local socket off", "socket", path, "err", err)
		return
	}
	ln, err := listenSocket(path)
	if err != nil {
		a.log.Warn("local socket off: clients on this host need a token", "socket", path, "err", err)
		return
	}
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerOf(c))
		},
	}
	a.log.Info("local socket: this host's users need no token", "socket", path)
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(shut)
		hs.Close()
		_ = os.Remove(path)
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("local socket stopped", "socket", path, "err", err)
		}
	}()
}
