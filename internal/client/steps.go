package client

import (
	"bytes"
	"context"
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

// ErrRunEnded is NextStep's answer once the run has ended.
var ErrRunEnded = errors.New("client: the run has ended")

// CreateStep starts a job step on node ranks of an active run (srun inside
// an allocation).
func (c *Client) CreateStep(ctx context.Context, ref string, req api.StepRequest) (*api.StepCreated, error) {
	var out api.StepCreated
	return &out, c.do(ctx, c.http, http.MethodPost, "/runs/"+url.PathEscape(ref)+"/steps", req, &out)
}

// NextStep waits (up to the server's poll time) for the next step of a
// node rank after step `after` of the relay's epoch: nil when none came,
// ErrRunEnded once the run has ended.
func (c *Client) NextStep(ctx context.Context, ref string, rank, after int, epoch string) (*api.StepAssignment, error) {
	q := url.Values{"rank": {strconv.Itoa(rank)}, "after": {strconv.Itoa(after)}, "epoch": {epoch}}
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
	var st api.StepAssignment
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("client: decode step: %w", err)
	}
	return &st, nil
}

// StepOutput appends output of a step on a node rank.
func (c *Client) StepOutput(ctx context.Context, ref string, id, rank int, data []byte) error {
	resp, err := c.raw(ctx, http.MethodPost, fmt.Sprintf("/runs/%s/steps/%d/output?rank=%d", url.PathEscape(ref), id, rank), "application/octet-stream", data)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readError(resp)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// StepExit records how a step ended on a node rank.
func (c *Client) StepExit(ctx context.Context, ref string, id, rank, code int) error {
	return c.do(ctx, c.http, http.MethodPost, fmt.Sprintf("/runs/%s/steps/%d/exit?rank=%d", url.PathEscape(ref), id, rank), api.StepExit{Code: code}, nil)
}

// StepStatus returns a step's output after the offsets (by rank) and its
// exits, waiting up to the server's poll time for something new.
func (c *Client) StepStatus(ctx context.Context, ref string, id int, from map[int]int64) (*api.StepStatus, error) {
	var parts []string
	for k, o := range from {
		parts = append(parts, fmt.Sprintf("%d:%d", k, o))
	}
	sort.Strings(parts)
	var out api.StepStatus
	p := fmt.Sprintf("/runs/%s/steps/%d", url.PathEscape(ref), id)
	if len(parts) > 0 {
		p += "?from=" + strings.Join(parts, ",")
	}
	return &out, c.do(ctx, c.stream, http.MethodGet, p, nil, &out)
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
	req.Header.Set("Authorization", "Bearer "+c.token)
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
