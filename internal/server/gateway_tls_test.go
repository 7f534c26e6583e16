package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// under dir, and answers their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "berth test gateway"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "gw.crt"), filepath.Join(dir, "gw.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestGatewayTLS: a server started with a certificate serves HTTPS on a
// listener of its own; a service with `https: true` is then accepted, a
// real HTTPS request reaches its real replica through the gateway (the
// replica told X-Forwarded-Proto https), and a plain request for it is
// redirected there (308). A certificate and key that do not match are
// refused before the server starts.
func TestGatewayTLS(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	if err := LoadGatewayTLS(certFile, certFile); err == nil || !strings.Contains(err.Error(), "--gateway-tls-cert") {
		t.Errorf("a certificate as its own key: %v, want a refusal naming the flags", err)
	}
	if err := LoadGatewayTLS(certFile, ""); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.GatewayTLSCert, c.GatewayTLSKey = certFile, keyFile })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.srv.ServeTLS(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	dir := t.TempDir()
	port := freePort(t)
	// The replica answers with the scheme the gateway says it was asked in.
	conf := strings.Replace(webService("sec", port, "v1", dir, "https: true\nauth: false"),
		`b = ("%s %d %s" % (os.environ["VERSION"], port, self.path)).encode()`,
		`b = ("%s %d %s %s" % (os.environ["VERSION"], port, self.path, self.headers.get("X-Forwarded-Proto", "-"))).encode()`, 1)
	applyService(t, h, conf)
	stopServiceAtEnd(t, h, "sec")
	hs := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + ln.Addr().String() + "/proxy/services/main/sec/hello"
	resp, err := hs.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || string(b) != "v1 "+strconv.Itoa(port)+" /hello https" {
		t.Errorf("HTTPS through the gateway: %d %q (TLS %v), want 200 \"v1 %d /hello https\"", resp.StatusCode, b, resp.TLS != nil, port)
	}
	// Plain HTTP for an https: true service: to the HTTPS listener.
	plain := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = plain.Get(h.http.URL + "/proxy/services/main/sec/hello?x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := url + "?x=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Errorf("plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	// The server's own routes answer over HTTPS too.
	resp, err = hs.Get("https://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz over HTTPS: %d", resp.StatusCode)
	}
}
