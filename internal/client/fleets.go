package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// PlanFleet answers what applying the fleet would do, changing nothing.
func (c *Client) PlanFleet(ctx context.Context, req api.FleetApplyRequest) (*api.FleetPlan, error) {
	req.Plan = true
	var out api.FleetPlan
	return &out, c.do(ctx, c.http, http.MethodPost, "/fleets", req, &out)
}

// ApplyFleet creates or updates a fleet; the server installs its hosts in
// the background (watch them with Fleet).
func (c *Client) ApplyFleet(ctx context.Context, req api.FleetApplyRequest) (*api.Fleet, error) {
	req.Plan = false
	var out api.Fleet
	return &out, c.do(ctx, c.http, http.MethodPost, "/fleets", req, &out)
}

// Fleet returns one fleet with its hosts' state.
func (c *Client) Fleet(ctx context.Context, name string) (*api.Fleet, error) {
	var out api.Fleet
	return &out, c.do(ctx, c.http, http.MethodGet, "/fleets/"+url.PathEscape(name), nil, &out)
}

// Fleets lists the fleets of the caller's projects.
func (c *Client) Fleets(ctx context.Context) ([]api.Fleet, error) {
	var out []api.Fleet
	return out, c.do(ctx, c.http, http.MethodGet, "/fleets", nil, &out)
}

// DeleteFleet starts deleting a fleet: drain, wait for jobs (force: do
// not), uninstall. The fleet is gone (404) when it is done.
func (c *Client) DeleteFleet(ctx context.Context, name string, force bool) (*api.Fleet, error) {
	q := ""
	if force {
		q = "?force=true"
	}
	var out api.Fleet
	return &out, c.do(ctx, c.http, http.MethodDelete, "/fleets/"+url.PathEscape(name)+q, nil, &out)
}
