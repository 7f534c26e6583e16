package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/berth-hq/berth/internal/api"
)

// Metrics, health and drains.

// MetricsOptions select how much of a run's metrics to fetch.
type MetricsOptions struct {
	// History bounds the samples of each job's history, the newest kept
	// (0: none, only the latest sample; negative: all the server keeps).
	History int
}

// RunMetrics returns the latest sample and the history of each job of a
// run.
func (c *Client) RunMetrics(ctx context.Context, ref string, o MetricsOptions) (*api.RunMetrics, error) {
	q := ""
	if o.History >= 0 {
		q = "?history=" + strconv.Itoa(o.History)
	}
	var m api.RunMetrics
	return &m, c.do(ctx, c.http, http.MethodGet, "/runs/"+url.PathEscape(ref)+"/metrics"+q, nil, &m)
}

// Drain stops a node from getting new jobs; the running ones go on.
func (c *Client) Drain(ctx context.Context, node, reason string) (*api.Node, error) {
	return c.SetDrain(ctx, node, api.DrainRequest{Reason: reason})
}

// SetDrain drains a node, or sets it down (req.Down).
func (c *Client) SetDrain(ctx context.Context, node string, req api.DrainRequest) (*api.Node, error) {
	var n api.Node
	return &n, c.do(ctx, c.http, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/drain", req, &n)
}

// Resume lifts an administrator's drain of a node.
func (c *Client) Resume(ctx context.Context, node string) (*api.Node, error) {
	var n api.Node
	return &n, c.do(ctx, c.http, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/resume", struct{}{}, &n)
}

// AgentMetrics posts a node's samples of its running jobs.
func (c *Client) AgentMetrics(ctx context.Context, m api.AgentMetrics) error {
	return c.do(ctx, c.http, http.MethodPost, "/agent/metrics", m, nil)
}

// AgentHealth reports the outcome of a node's health check.
func (c *Client) AgentHealth(ctx context.Context, h api.AgentHealth) error {
	return c.do(ctx, c.http, http.MethodPost, "/agent/health", h, nil)
}

// DeleteNode removes a node that runs nothing and whose agent is not
// connected (an administrator's).
func (c *Client) DeleteNode(ctx context.Context, node string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/nodes/"+url.PathEscape(node), nil, nil)
}
