package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/berth-hq/berth/internal/api"
)

// UsageQuery selects GET /usage's window and rows; zero fields: the
// server's defaults (the day before now), every project and user the
// caller may see.
type UsageQuery struct {
	Since, Until  time.Time
	Project, User string
}

// Usage is what jobs used over a window, by project and user.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (*api.UsageReport, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.Project != "" {
		v.Set("project", q.Project)
	}
	if q.User != "" {
		v.Set("user", q.User)
	}
	path := "/usage"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var rep api.UsageReport
	return &rep, c.do(ctx, c.http, http.MethodGet, path, nil, &rep)
}

// Fairshare is the fairshare tree as the scheduler weighs it now (sshare).
func (c *Client) Fairshare(ctx context.Context) ([]api.ShareRow, error) {
	var rows []api.ShareRow
	return rows, c.do(ctx, c.http, http.MethodGet, "/fairshare", nil, &rows)
}
