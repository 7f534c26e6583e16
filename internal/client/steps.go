package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/api"
)

// ErrRunEnded is NextWork's answer once the run has ended.
var ErrRunEnded = errors.New("client: the run has ended")

// CreateStep starts a job step on node ranks of an active run (srun inside
// an allocation).
func (c *Client) CreateStep(ctx context.Context, ref string, req api.StepRequest) (*api.StepCreated, error) {
	var out api.StepCreated
	return &out, c.do(ctx, c.http, http.MethodPost, "/runs/"+url.PathEscape(ref)+"/steps", req, &out)
}

// NextWork waits (up to the server's poll time) for a node rank's work:
// the steps after step `after` and the signals after sequence `sig`; nil
// when none came, ErrRunEnded once the run has ended.
func (c *Client) NextWork(ctx context.Context, ref string, rank, after int, sig int64) (*api.StepWork, error) {
	q := url.Values{"rank": {strconv.Itoa(rank)}, "after": {strconv.Itoa(after)}, "sig": {strconv.FormatInt(sig, 10)}}
	resp, err := c.raw(ctx, http.MethodGet, "/runs/"+url.PathEscape(ref)+"/steps/next?"+q.Encode(), "", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return nil, nil
	case resp.StatusCode == http.StatusGone:
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, ErrRunEnded
	case resp.StatusCode/100 != 2:
		return nil, readError(resp)
	}
	var w api.StepWork
	if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
		return nil, fmt.Errorf("client: decode step work: %w", err)
	}
	return &w, nil
}

// OutputOptions place a step's output: its stream (1 stdout, 2 stderr),
// its offset, whether that offset is the oldest byte the host kept
// (after the server said it knows nothing), and whether to wait for srun
// to read when there is nothing to send.
type OutputOptions struct {
	FD    int
	At    int64
	Start bool
	Wait  bool
}

// StepOutput sends output of a step on a node rank and returns the
// server's acknowledgement.
func (c *Client) StepOutput(ctx context.Context, ref string, id, rank int, o OutputOptions, data []byte) (api.StepAck, error) {
	q := url.Values{"rank": {strconv.Itoa(rank)}, "fd": {strconv.Itoa(max(o.FD, 1))}, "at": {strconv.FormatInt(o.At, 10)}}
	if o.Start {
		q.Set("start", "1")
	}
	if o.Wait {
		q.Set("wait", "1")
	}
	var ack api.StepAck
	hc := c.http
	if o.Wait {
		hc = c.stream
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+api.Version+fmt.Sprintf("/runs/%s/steps/%d/output?%s", url.PathEscape(ref), id, q.Encode()), bytes.NewReader(data))
	if err != nil {
		return ack, fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return ack, fmt.Errorf("client: step output: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return ack, readError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(&ack); err != nil {
		return ack, fmt.Errorf("client: decode step ack: %w", err)
	}
	return ack, nil
}

// StepExit records how a step ended on a node rank.
func (c *Client) StepExit(ctx context.Context, ref string, id, rank int, x api.StepExit) error {
	return c.do(ctx, c.http, http.MethodPost, fmt.Sprintf("/runs/%s/steps/%d/exit?rank=%d", url.PathEscape(ref), id, rank), x, nil)
}

// StepAlive says srun still follows the step (the server kills a step
// whose srun it has not heard of for a minute).
func (c *Client) StepAlive(ctx context.Context, ref string, id int) error {
	return c.do(ctx, c.http, http.MethodPost, fmt.Sprintf("/runs/%s/steps/%d/alive", url.PathEscape(ref), id), struct{}{}, nil)
}

// CancelStep cancels a running step (scancel JOB.STEP).
func (c *Client) CancelStep(ctx context.Context, ref string, id int) error {
	return c.do(ctx, c.http, http.MethodPost, fmt.Sprintf("/runs/%s/steps/%d/cancel", url.PathEscape(ref), id), struct{}{}, nil)
}

// StepSignal forwards a signal to a step's tasks on its hosts.
func (c *Client) StepSignal(ctx context.Context, ref string, id, sig int) error {
	return c.do(ctx, c.http, http.MethodPost, fmt.Sprintf("/runs/%s/steps/%d/signal", url.PathEscape(ref), id), api.StepSignalRequest{Signal: sig}, nil)
}

func offsetParam(m map[int]int64) string {
	var parts []string
	for k, o := range m {
		parts = append(parts, fmt.Sprintf("%d:%d", k, o))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// StepStatus returns a step's output after the offsets (by rank, stdout
// and stderr) and its exits, waiting up to the server's poll time for
// something new; knowsCancel says the caller has seen the step cancelled.
func (c *Client) StepStatus(ctx context.Context, ref string, id int, from, errFrom map[int]int64, knowsCancel bool) (*api.StepStatus, error) {
	q := url.Values{}
	if knowsCancel {
		q.Set("cancelled", "1")
	}
	if v := offsetParam(from); v != "" {
		q.Set("from", v)
	}
	if v := offsetParam(errFrom); v != "" {
		q.Set("errfrom", v)
	}
	var out api.StepStatus
	return &out, c.do(ctx, c.stream, http.MethodGet, fmt.Sprintf("/runs/%s/steps/%d?%s", url.PathEscape(ref), id, q.Encode()), nil, &out)
}

// Steps lists the recorded steps of runs.
func (c *Client) Steps(ctx context.Context, runIDs []int64) ([]api.Step, error) {
	if len(runIDs) == 0 {
		return nil, nil
	}
	var out []api.Step
	// In slices: a URL has its bounds.
	for len(runIDs) > 0 {
		part := runIDs[:min(len(runIDs), 400)]
		runIDs = runIDs[len(part):]
		ids := make([]string, len(part))
		for i, id := range part {
			ids[i] = strconv.FormatInt(id, 10)
		}
		var got []api.Step
		if err := c.do(ctx, c.http, http.MethodGet, "/steps?runs="+strings.Join(ids, ","), nil, &got); err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// Attach opens one end (side "client" or "host") of a step's attach
// stream on a node rank; the server joins it to the other end. Read and
// write frames on it with ReadFrame and WriteFrame.
func (c *Client) Attach(ctx context.Context, ref string, id, rank int, side string) (io.ReadWriteCloser, error) {
	q := url.Values{"rank": {strconv.Itoa(rank)}, "side": {side}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+api.Version+fmt.Sprintf("/runs/%s/steps/%d/attach?%s", url.PathEscape(ref), id, q.Encode()), nil)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", api.AttachProtocol)
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: attach: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, errors.New("client: attach: the connection cannot be written")
	}
	return rwc, nil
}

// WriteFrame writes one frame of an attach stream.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	hdr := [5]byte{typ}
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(append(hdr[:], payload...)); err != nil {
		return err
	}
	return nil
}

// maxFrame bounds a frame's payload.
const maxFrame = 1 << 20

// ReadFrame reads one frame of an attach stream.
func ReadFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("client: attach frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return hdr[0], p, nil
}

func (c *Client) raw(ctx context.Context, method, path, ctype string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+api.Version+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.authorize(req)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	hc := c.http
	if method == http.MethodGet {
		hc = c.stream // long polls
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	return resp, nil
}
