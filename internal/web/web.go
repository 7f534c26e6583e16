package web

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/klauspost/compress/gzhttp"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// cookieName holds the signed-in user's API token.
const cookieName = "berth_token"

// Prefix is where the dashboard's pages are; "/" redirects to its runs.
const Prefix = "/ui/"

// Options adjust a dashboard; the zero value is the default.
type Options struct {
	Logger *slog.Logger
	// Changed, when set, gives a channel closed at the cluster's next
	// change: the live views (runs, fleets, a run) are read again when it
	// is closed, at most once every Spacing, and every Refresh otherwise
	// (times and estimates age without a change). Without it they are
	// read every Poll (default 1 s).
	Changed func() <-chan struct{}
	Spacing time.Duration // default 250 ms
	Refresh time.Duration // default 15 s
	Poll    time.Duration
}

// UI is the dashboard's HTTP handler.
type UI struct {
	api     http.Handler
	opt     Options
	log     *slog.Logger
	pages   map[string]*template.Template
	mux     *http.ServeMux
	handler http.Handler // mux, compressing

	once sync.Once
	base *client.Client
}

// New serves the dashboard over apiHandler, the server's API (the handler
// that serves /api/v1).
func New(apiHandler http.Handler, opt Options) *UI {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.Spacing <= 0 {
		opt.Spacing = 250 * time.Millisecond
	}
	if opt.Refresh <= 0 {
		opt.Refresh = 15 * time.Second
	}
	u := &UI{api: apiHandler, opt: opt, log: opt.Logger, pages: parsePages()}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"runs", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix+"runs", http.StatusSeeOther)
	})
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /ui/static/", cacheFor(http.StripPrefix("/ui/static/", http.FileServerFS(static))))
	m.HandleFunc("GET /ui/login", u.loginPage)
	m.HandleFunc("POST /ui/login", u.login)
	m.HandleFunc("POST /ui/logout", u.logout)
	m.HandleFunc("GET /ui/runs", u.signedIn(u.runsPage))
	m.HandleFunc("GET /ui/runs/events", u.signedIn(u.runsEvents))
	m.HandleFunc("GET /ui/runs/{ref}", u.signedIn(u.runPage))
	m.HandleFunc("GET /ui/runs/{ref}/events", u.signedIn(u.runEvents))
	m.HandleFunc("GET /ui/runs/{ref}/log", u.signedIn(u.logEvents))
	m.HandleFunc("GET /ui/runs/{ref}/log.txt", u.signedIn(u.logText))
	m.HandleFunc("POST /ui/runs/{ref}/stop", u.signedIn(u.stop))
	m.HandleFunc("POST /ui/runs/{ref}/control", u.signedIn(u.control))
	m.HandleFunc("GET /ui/fleets", u.signedIn(u.fleetsPage))
	m.HandleFunc("GET /ui/fleets/events", u.signedIn(u.fleetsEvents))
	m.HandleFunc("POST /ui/nodes/{name}/drain", u.signedIn(u.drain))
	m.HandleFunc("POST /ui/nodes/{name}/resume", u.signedIn(u.resume))
	m.HandleFunc("GET /ui/queue", u.signedIn(u.queuePage))
	m.HandleFunc("GET /ui/submit", u.signedIn(u.submitPage))
	m.HandleFunc("POST /ui/submit", u.signedIn(u.submit))
	m.HandleFunc("GET /ui/runs/{ref}/search", u.signedIn(u.searchLog))
	m.HandleFunc("GET /ui/usage", u.signedIn(u.usagePage))
	u.mux = m
	// Pages, fragments and assets go gzipped to a browser that takes it
	// (the page weight is a fifth); the live streams do not: each event is
	// small and must leave at once.
	gz, err := gzhttp.NewWrapper(gzhttp.ExceptContentTypes([]string{"text/event-stream"}), gzhttp.EnableZstd(false))
	if err != nil {
		panic(err) // fixed options
	}
	u.handler = gz(m)
	return u
}

func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// The pages load only their own scripts and styles; no page may frame them.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	u.handler.ServeHTTP(w, r)
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// client is the API's client acting with token. The API is served to it
// in-process, over an in-memory connection, started at the first use.
func (u *UI) client(token string) *client.Client {
	u.once.Do(func() {
		ln := newMemListener()
		srv := &http.Server{Handler: u.api, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(u.log.Handler(), slog.LevelDebug)}
		go srv.Serve(ln) // for the process's life, as the server's own listener
		u.base = client.NewDial("http://berth-api", "", ln.dial)
	})
	return u.base.WithToken(token)
}

// session is a signed-in request's user and client.
type session struct {
	c   *client.Client
	who *api.WhoAmI
}

// signedIn serves h to a request that carries a valid token; others go to
// the login page (a live stream's request is answered 401).
func (u *UI) signedIn(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(cookieName)
		if err == nil && ck.Value != "" {
			c := u.client(ck.Value)
			who, werr := c.WhoAmI(r.Context())
			if werr == nil && who.Kind == "user" {
				h(w, r, &session{c: c, who: who})
				return
			}
		}
		if strings.HasSuffix(r.URL.Path, "/events") || strings.HasSuffix(r.URL.Path, "/log") || r.Method != http.MethodGet {
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	}
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

// login checks the token against the API (whoami) before keeping it.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	msg := "Enter a token (berth token create)."
	if token != "" {
		who, err := u.client(token).WhoAmI(r.Context())
		switch {
		case err != nil:
			msg = "Sign-in refused: " + err.Error()
		case who.Kind != "user":
			msg = "Sign-in refused: this is a " + who.Kind + "'s credential; use a user's token."
		default:
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: token, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	// The form again, with the refusal: a page that loaded (200), so that
	// browsers do not report a failed resource.
	u.render(w, r, http.StatusOK, "login", map[string]any{"Next": next, "Error": msg})
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// safeNext keeps a redirect on this site's dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix + "runs"
	}
	return next
}

// render writes page name with data; a page's data is a map with the
// session's user added.
func (u *UI) render(w http.ResponseWriter, r *http.Request, code int, name string, data map[string]any) {
	t := u.pages[name]
	if data == nil {
		data = map[string]any{}
	}
	data["Page"] = name
	var sb strings.Builder
	if err := t.ExecuteTemplate(&sb, "page", data); err != nil {
		u.log.Error("dashboard page", "page", name, "err", err)
		http.Error(w, "the page could not be drawn: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write([]byte(sb.String()))
}

// apiFailure shows an API's refusal as a page (its status kept).
func (u *UI) apiFailure(w http.ResponseWriter, r *http.Request, s *session, err error) {
	code := http.StatusBadGateway
	var ae *client.APIError
	if errors.As(err, &ae) {
		code = ae.Status
	}
	u.render(w, r, code, "error", map[string]any{"Who": s.who, "Error": err.Error()})
}

// memListener is an in-memory listener: the dashboard's client reaches the
// API through it without a socket.
type memListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- b:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "dashboard" }

// parsePages parses each page with the layout it fills.
func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"login", "runs", "run", "fleets", "queue", "submit", "usage", "error"} {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return out
}
