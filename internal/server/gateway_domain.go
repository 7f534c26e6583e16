package server

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// The gateway's domain (issue 16): with `berth server --gateway-domain
// example.test`, a request whose Host is NAME.PROJECT.example.test goes to
// service NAME of project PROJECT, and NAME.example.test to service NAME
// of the default project (dstack's `<run name>.<gateway domain>`), its
// path untouched (no prefix to strip), besides /proxy/services/PROJECT/NAME/
// on any host. DNS is the operator's: a wildcard record *.example.test
// (and *.*.example.test for other projects than the default) pointing at
// the server. A scheme and a port may be given (https://example.test,
// example.test:3000): they are only what the service URLs say (Berth
// serves plain HTTP; a TLS proxy in front makes them https). Host names
// are matched without their port, in lower case; a host that is the
// domain itself, or not under it, is the server's own API.

// gatewayDomain is a parsed --gateway-domain.
type gatewayDomain struct {
	scheme, domain, port string
}

// ParseGatewayDomain checks a --gateway-domain value: [SCHEME://]DOMAIN[:PORT].
func ParseGatewayDomain(v string) error {
	_, err := parseGatewayDomain(v)
	return err
}

func parseGatewayDomain(v string) (gatewayDomain, error) {
	g := gatewayDomain{scheme: "http"}
	if v == "" {
		return gatewayDomain{}, nil
	}
	rest := v
	if i := strings.Index(rest, "://"); i >= 0 {
		g.scheme, rest = strings.ToLower(rest[:i]), rest[i+3:]
		if g.scheme != "http" && g.scheme != "https" {
			return gatewayDomain{}, fmt.Errorf("--gateway-domain %q: the scheme must be http or https", v)
		}
	}
	rest = strings.TrimSuffix(rest, "/")
	if h, p, err := net.SplitHostPort(rest); err == nil {
		rest, g.port = h, p
	}
	g.domain = strings.ToLower(strings.TrimSuffix(rest, "."))
	labels := strings.Split(g.domain, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return gatewayDomain{}, fmt.Errorf("--gateway-domain %q: not a domain name such as example.com (letters, digits, - and dots; an optional http:// or https:// and :PORT)", v)
		}
	}
	return g, nil
}

// gwDomain is the server's parsed --gateway-domain (zero: none).
func (s *Server) gwDomain() gatewayDomain {
	s.svc.domainOnce.Do(func() {
		s.svc.domain, _ = parseGatewayDomain(s.cfg.GatewayDomain) // checked by berth server
	})
	return s.svc.domain
}

// hostRoute sends requests for a service's host to the gateway, the rest
// to next.
func (s *Server) hostRoute(next http.Handler) http.Handler {
	g := s.gwDomain()
	if g.domain == "" {
		return next
	}
	suffix := "." + g.domain
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		sub, ok := strings.CutSuffix(host, suffix)
		if !ok || sub == "" {
			next.ServeHTTP(w, r)
			return
		}
		labels := strings.Split(sub, ".")
		switch len(labels) {
		case 1:
			s.serveService(w, r, DefaultProject, labels[0], "")
		case 2:
			s.serveService(w, r, labels[1], labels[0], "")
		default:
			http.Error(w, fmt.Sprintf("berth gateway: %s is not a service's host (NAME.%s or NAME.PROJECT.%s)", host, g.domain, g.domain), http.StatusNotFound)
		}
	})
}

// serviceURLs are the URLs the gateway answers service name of project
// at on its domain (none without one): NAME.PROJECT.DOMAIN, and
// NAME.DOMAIN in the default project.
func (s *Server) serviceURLs(project, name string) []string {
	g := s.gwDomain()
	if g.domain == "" {
		return nil
	}
	port := ""
	if g.port != "" {
		port = ":" + g.port
	}
	var out []string
	if project == DefaultProject {
		out = append(out, g.scheme+"://"+name+"."+g.domain+port+"/")
	}
	return append(out, g.scheme+"://"+name+"."+project+"."+g.domain+port+"/")
}
