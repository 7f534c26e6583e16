// Package client is the typed Go client of Berth's HTTP API. The CLI, the
// agents, the benchmarks and the tests talk to the server only through it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// Client talks to one Berth server with one token.
type Client struct {
	base  string
	token string
	http  *http.Client
	// stream is used for long-lived responses (log follow, agent stream): no
	// overall timeout.
	stream *http.Client
	// project is the project the secrets calls are about ("": the
	// caller's default); see InProject.
	project string
	// dial reaches the server, for the upgraded connections of tunnels
	// (tunnel.go).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// APIError is a non-2xx answer of the server.
type APIError struct {
	Status  int
	Message string
	// Field is the configuration's field the error is about, when the
	// server says (api.Error.Field).
	Field string
}

func (e *APIError) Error() string { return e.Message }

// ErrNotFound matches an APIError with status 404 (errors.Is).
var ErrNotFound = errors.New("client: not found")

// ErrConflict matches an APIError with status 409: what was changed had
// changed since it was read (errors.Is).
var ErrConflict = errors.New("client: conflict")

// Is makes errors.Is(err, ErrNotFound) work on 404 answers and
// errors.Is(err, ErrConflict) on 409 ones.
func (e *APIError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound || target == ErrConflict && e.Status == http.StatusConflict
}

// New returns a client of the server at baseURL ("http://127.0.0.1:3000",
// or several replicas' URLs, comma-separated).
func New(baseURL, token string) *Client {
	return newClient(baseURL, token, (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
}

// BaseURL is the server's URL the client talks to.
func (c *Client) BaseURL() string { return c.base }

// NewUnix returns a client of the server through a node's agent, on its
// local socket at path: no token; the agent tells the server who the
// caller is (its Unix user) and vouches for it.
func NewUnix(path string) *Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return newClient("http://berth-agent", "", func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	})
}

// NewDial returns a client of the server at baseURL that reaches it
// through dial: the dashboard (internal/web) calls the API in-process so.
func NewDial(baseURL, token string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	return newClient(baseURL, token, dial)
}

// WithToken is c acting with another token, on c's connections.
// InProject is c with its secrets calls about the project name ("": the
// caller's default project).
func (c *Client) InProject(name string) *Client {
	cc := *c
	cc.project = name
	return &cc
}

func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

func newClient(baseURL, token string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
	// Several comma-separated URLs: the replicas of one cluster
	// (failover.go); requests name the first, Failover picks.
	urls := SplitURLs(baseURL)
	rt := Failover(urls, tr)
	if len(urls) > 0 {
		baseURL = urls[0]
	}
	return &Client{
		base:   strings.TrimRight(baseURL, "/"),
		token:  token,
		http:   &http.Client{Transport: rt, Timeout: 60 * time.Second},
		stream: &http.Client{Transport: rt},
		dial:   dial,
	}
}

// authorize puts the client's token on req (none through a socket).
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

func (c *Client) do(ctx context.Context, hc *http.Client, method, path string, in, out any) error {
	return c.doKey(ctx, hc, method, path, "", in, out)
}

// doKey is do with an Idempotency-Key header ("": none).
func (c *Client) doKey(ctx context.Context, hc *http.Client, method, path, key string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: encode: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+api.Version+path, body)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("client: decode %s: %w", path, err)
	}
	return nil
}

func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e api.Error
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return &APIError{Status: resp.StatusCode, Message: e.Error, Field: e.Field}
	}
	return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf("server answered %s: %s", resp.Status, strings.TrimSpace(string(b)))}
}

// Submit creates a run; it returns once the run is durable.
//
// It sends an Idempotency-Key and, when the connection fails before an
// answer arrives (the server may have made the run), sends the same
// request again, up to five times: the server answers the run the key
// made, never a second one.
func (c *Client) Submit(ctx context.Context, req api.SubmitRequest) (*api.Run, error) {
	var k [16]byte
	_, _ = rand.Read(k[:])
	key := hex.EncodeToString(k[:])
	var r api.Run
	var err error
	for try := range submitTries {
		err = c.doKey(ctx, c.http, http.MethodPost, "/runs", key, req, &r)
		var apiErr *APIError
		if err == nil || errors.As(err, &apiErr) || ctx.Err() != nil || try == submitTries-1 {
			break
		}
		select {
		case <-ctx.Done():
			return &r, err
		case <-time.After(time.Duration(100<<try) * time.Millisecond):
		}
	}
	return &r, err
}

// SubmitKey makes one attempt to create a run with the given
// Idempotency-Key: the caller retries as it sees fit, with the same key.
func (c *Client) SubmitKey(ctx context.Context, req api.SubmitRequest, key string) (*api.Run, error) {
	var r api.Run
	return &r, c.doKey(ctx, c.http, http.MethodPost, "/runs", key, req, &r)
}

// submitTries bounds Submit's attempts over failing connections.
const submitTries = 5

// Plan shows where a configuration would run, without submitting it.
func (c *Client) Plan(ctx context.Context, req api.SubmitRequest) (*api.Plan, error) {
	var p api.Plan
	return &p, c.do(ctx, c.http, http.MethodPost, "/plan", req, &p)
}

// Run returns one run, with its jobs, by ID or name.
func (c *Client) Run(ctx context.Context, ref string) (*api.Run, error) {
	var r api.Run
	return &r, c.do(ctx, c.http, http.MethodGet, "/runs/"+url.PathEscape(ref), nil, &r)
}

// ListOptions select runs.
type ListOptions struct {
	All   bool
	Jobs  bool
	Limit int
	// Spec includes each run's configuration (the Slurm commands need it).
	Spec bool
	// Lean leaves out of each configuration its commands, environment
	// and files (a batch script, an exported environment: the bulk of a
	// listing, and nothing the Slurm listings show).
	Lean bool
	// IDs keeps these runs and the tasks of the arrays among them; Users
	// and Statuses the runs of these users and in these statuses (nil:
	// any).
	IDs      []int64
	Users    []string
	Statuses []api.Status
	// Project keeps the runs of that project ("": every project seen).
	Project string
	// Since keeps the runs not final before it, Until those submitted
	// before it (zero: no bound): sacct's window.
	Since, Until time.Time
}

// Stop stops a run: SIGTERM, grace, SIGKILL; or SIGKILL at once with abort.
func (c *Client) Stop(ctx context.Context, ref string, abort bool) (*api.Run, error) {
	var r api.Run
	return &r, c.do(ctx, c.http, http.MethodPost, "/runs/"+url.PathEscape(ref)+"/stop", api.StopRequest{Abort: abort}, &r)
}

// Signal sends a signal to a run's running jobs without stopping them, and
// returns how many it reached.
func (c *Client) Signal(ctx context.Context, ref string, sig int, batchOnly bool) (int, error) {
	return c.SignalRun(ctx, ref, api.SignalRequest{Signal: sig, BatchOnly: batchOnly})
}

// SignalRun signals a run's running jobs as req says (every process, the
// main one, or its steps' tasks); it answers how many jobs were sent it.
func (c *Client) SignalRun(ctx context.Context, ref string, req api.SignalRequest) (int, error) {
	var out struct {
		Jobs int `json:"jobs"`
	}
	return out.Jobs, c.do(ctx, c.http, http.MethodPost, "/runs/"+url.PathEscape(ref)+"/signal", req, &out)
}

// Control holds, releases, requeues or updates a run (scontrol's verbs).
func (c *Client) Control(ctx context.Context, ref string, req api.ControlRequest) (*api.Run, error) {
	var r api.Run
	return &r, c.do(ctx, c.http, http.MethodPost, "/runs/"+url.PathEscape(ref)+"/control", req, &r)
}

// Policy returns the scheduling policy in force: QOS, associations, fleets.
func (c *Client) Policy(ctx context.Context) (*api.PolicyInfo, error) {
	var p api.PolicyInfo
	return &p, c.do(ctx, c.http, http.MethodGet, "/policy", nil, &p)
}

// ReloadPolicy has the server read its policy file again (admin only); it
// answers the policy now in force.
func (c *Client) ReloadPolicy(ctx context.Context) (*api.PolicyInfo, error) {
	var p api.PolicyInfo
	return &p, c.do(ctx, c.http, http.MethodPost, "/policy/reload", nil, &p)
}

// PolicyFile returns the server's policy file: its text and version.
func (c *Client) PolicyFile(ctx context.Context) (*api.PolicyFile, error) {
	var f api.PolicyFile
	return &f, c.do(ctx, c.http, http.MethodGet, "/policy/file", nil, &f)
}

// PutPolicyFile replaces the policy file's text, edited from the given
// version, and puts it in force (admin only). A file changed since answers
// ErrConflict; a text that does not parse, a 400 naming line and field.
func (c *Client) PutPolicyFile(ctx context.Context, text, version string) (*api.PolicyFile, error) {
	var f api.PolicyFile
	return &f, c.do(ctx, c.http, http.MethodPut, "/policy/file", api.PolicyFile{Text: text, Version: version}, &f)
}

// Nodes lists the cluster's nodes.
func (c *Client) Nodes(ctx context.Context) ([]api.Node, error) {
	var ns []api.Node
	return ns, c.do(ctx, c.http, http.MethodGet, "/nodes", nil, &ns)
}

// Priorities lists the pending runs' priority factors, highest first.
func (c *Client) Priorities(ctx context.Context) ([]api.RunPriority, error) {
	var out []api.RunPriority
	return out, c.do(ctx, c.http, http.MethodGet, "/priorities", nil, &out)
}

// PrioritiesOf is Priorities for the waiting runs among ids only (nil:
// every waiting run; empty: none, without asking).
func (c *Client) PrioritiesOf(ctx context.Context, ids []int64) ([]api.RunPriority, error) {
	if ids == nil {
		return c.Priorities(ctx)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	var out []api.RunPriority
	return out, c.do(ctx, c.http, http.MethodGet, "/priorities?ids="+strings.Join(list, ","), nil, &out)
}

// Status is the server's account of itself.
func (c *Client) Status(ctx context.Context) (*api.ServerStatus, error) {
	var st api.ServerStatus
	return &st, c.do(ctx, c.http, http.MethodGet, "/server", nil, &st)
}

// LogOptions select a run's output.
type LogOptions struct {
	Follow bool
	Job    int // job number; -1 for every job
	// Reconnect, with Follow, resumes a broken stream (a server restart)
	// where it stopped, for up to this long without an answer.
	Reconnect time.Duration
}

// Logs calls fn for every piece of the run's output in order. With Follow it
// returns when the run has ended and all its output was delivered, and gives
// the final run; without, it returns what is there now and a nil run.
func (c *Client) Logs(ctx context.Context, ref string, o LogOptions, fn func(api.LogEntry)) (*api.Run, error) {
	next := map[int64]int64{} // job -> first offset not yet delivered
	var end *api.Run
	backoff := 100 * time.Millisecond
	lastOK := time.Now()
	for {
		q := url.Values{}
		if o.Follow {
			q.Set("follow", "1")
		}
		if o.Job >= 0 {
			q.Set("job", strconv.Itoa(o.Job))
		}
		if len(next) > 0 {
			var from []string
			for job, off := range next {
				from = append(from, fmt.Sprintf("%d:%d", job, off))
			}
			q.Set("from", strings.Join(from, ","))
		}
		err := c.lines(ctx, "/runs/"+url.PathEscape(ref)+"/logs?"+q.Encode(), func(line []byte) error {
			var f api.LogFrame
			if err := json.Unmarshal(line, &f); err != nil {
				return fmt.Errorf("client: log frame: %w", err)
			}
			if f.Entry != nil {
				fn(*f.Entry)
				next[f.Entry.JobID] = f.Entry.Offset + 1
			}
			if f.End != nil {
				end = f.End
			}
			lastOK = time.Now()
			return nil
		})
		if err == nil && (end != nil || !o.Follow) {
			return end, nil
		}
		var apiErr *APIError
		if ctx.Err() != nil || errors.As(err, &apiErr) || o.Reconnect == 0 || time.Since(lastOK) > o.Reconnect {
			if err == nil {
				err = fmt.Errorf("client: log stream of %s ended early", ref)
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// get GETs path with no time limit (the caller reads the answer as it
// comes); an answer other than 2xx is an error.
func (c *Client) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+api.Version+path, nil)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: GET %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// lines GETs path and calls fn for each newline-delimited JSON line.
func (c *Client) lines(ctx context.Context, path string, fn func([]byte) error) error {
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(line); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("client: read %s: %w", path, err)
		}
	}
}

// Register announces an agent's node and its resources.
func (c *Client) Register(ctx context.Context, info api.NodeInfo) error {
	return c.do(ctx, c.http, http.MethodPost, "/agent/register", info, nil)
}

// AgentStream opens the node's assignment stream and calls fn for each
// message until the stream ends, fn fails or ctx is done.
func (c *Client) AgentStream(ctx context.Context, node string, fn func(api.AgentMessage) error) error {
	return c.lines(ctx, "/agent/stream?node="+url.QueryEscape(node), func(line []byte) error {
		var m api.AgentMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return fmt.Errorf("client: agent message: %w", err)
		}
		return fn(m)
	})
}

// AgentEvents reports a batch of job events of a node.
func (c *Client) AgentEvents(ctx context.Context, ev api.AgentEvents) (*api.AgentAck, error) {
	var ack api.AgentAck
	return &ack, c.do(ctx, c.http, http.MethodPost, "/agent/events", ev, &ack)
}
