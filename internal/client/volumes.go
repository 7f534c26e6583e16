package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// PlanVolume says whether the volume of a configuration exists.
func (c *Client) PlanVolume(ctx context.Context, req api.VolumeApplyRequest) (*api.VolumePlan, error) {
	req.Plan = true
	var out api.VolumePlan
	return &out, c.do(ctx, c.http, http.MethodPost, "/volumes", req, &out)
}

// ApplyVolume creates (or registers) a volume; it returns once the
// provider answered (the volume active or failed).
func (c *Client) ApplyVolume(ctx context.Context, req api.VolumeApplyRequest) (*api.Volume, error) {
	req.Plan = false
	var out api.Volume
	return &out, c.do(ctx, c.http, http.MethodPost, "/volumes", req, &out)
}

// Volumes lists the volumes of the caller's projects (project: of that
// one only).
func (c *Client) Volumes(ctx context.Context, project string) ([]api.Volume, error) {
	q := ""
	if project != "" {
		q = "?project=" + url.QueryEscape(project)
	}
	var out []api.Volume
	return out, c.do(ctx, c.http, http.MethodGet, "/volumes"+q, nil, &out)
}

// DeleteVolume deletes a volume that no active run uses (a registered one
// is only forgotten).
func (c *Client) DeleteVolume(ctx context.Context, name, project string) error {
	q := ""
	if project != "" {
		q = "?project=" + url.QueryEscape(project)
	}
	return c.do(ctx, c.http, http.MethodDelete, "/volumes/"+url.PathEscape(name)+q, nil, nil)
}
