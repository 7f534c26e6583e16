package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// TLS on the gateway (issue 16): `berth server --gateway-tls-cert FILE
// --gateway-tls-key FILE` serves the server's handler (the gateway, the
// API and the dashboard) over HTTPS on a listener of its own
// (--gateway-tls-listen), beside the plain one. A service may then say
// `https: true`: the gateway answers it over HTTPS, and redirects a plain
// HTTP request for it there (308: method and body kept). The certificate
// is read again when its files change (a renewal needs no restart); a
// pair that does not load keeps the last good one in use.

// LoadGatewayTLS checks that certFile and keyFile are a certificate and
// its key (berth server refuses to start otherwise).
func LoadGatewayTLS(certFile, keyFile string) error {
	if certFile == "" && keyFile == "" {
		return nil
	}
	if certFile == "" || keyFile == "" {
		return errors.New("--gateway-tls-cert and --gateway-tls-key go together")
	}
	_, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("--gateway-tls-cert %s, --gateway-tls-key %s: %w", certFile, keyFile, err)
	}
	return nil
}

// gatewayCert is the gateway's certificate, reloaded when its files
// change (looked at no more than once every certCheck).
type gatewayCert struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	stamp             string // the files' sizes and times when cert was read
	checked           time.Time
}

const certCheck = 10 * time.Second

func (g *gatewayCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cert != nil && time.Since(g.checked) < certCheck {
		return g.cert, nil
	}
	g.checked = time.Now()
	stamp := fileStamp(g.certFile) + "/" + fileStamp(g.keyFile)
	if g.cert != nil && stamp == g.stamp {
		return g.cert, nil
	}
	c, err := tls.LoadX509KeyPair(g.certFile, g.keyFile)
	if err != nil {
		if g.cert != nil {
			return g.cert, nil // half-written renewal: the last good one
		}
		return nil, err
	}
	g.cert, g.stamp = &c, stamp
	return g.cert, nil
}

func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "-"
	}
	return strconv.FormatInt(fi.Size(), 10) + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// gatewayTLS reports whether the server has a certificate for HTTPS.
func (s *Server) gatewayTLS() bool { return s.cfg.GatewayTLSCert != "" && s.cfg.GatewayTLSKey != "" }

// ServeTLS serves the server's handler over HTTPS on ln until ctx ends,
// with Config.GatewayTLSCert and GatewayTLSKey.
func (s *Server) ServeTLS(ctx context.Context, ln net.Listener) error {
	if !s.gatewayTLS() {
		return errors.New("server: HTTPS needs --gateway-tls-cert and --gateway-tls-key")
	}
	g := &gatewayCert{certFile: s.cfg.GatewayTLSCert, keyFile: s.cfg.GatewayTLSKey}
	if _, err := g.get(nil); err != nil {
		return fmt.Errorf("--gateway-tls-cert %s: %w", g.certFile, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.svcInit()
		s.svc.mu.Lock()
		s.svc.tlsPort = a.Port
		s.svc.mu.Unlock()
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{GetCertificate: g.get, MinVersion: tls.VersionTLS12}}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			hs.Close()
		case <-done:
		}
	}()
	err := hs.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// toHTTPS redirects a plain request for a service that says `https:
// true` to the same URL on the HTTPS listener, and reports whether it
// did.
func (s *Server) toHTTPS(w http.ResponseWriter, r *http.Request, info *svcInfo) bool {
	if r.TLS != nil {
		return false
	}
	s.svc.mu.Lock()
	https := info.task != nil && info.task.HTTPS == "true"
	port := s.svc.tlsPort
	s.svc.mu.Unlock()
	if !https || port == 0 {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if port != 443 {
		host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	return true
}
