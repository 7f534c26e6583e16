package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// Secrets of the caller's project (InProject: of another of theirs).

// secretPath is the secrets route tail under /secrets, with the project.
func (c *Client) secretPath(tail string) string {
	p := "/secrets" + tail
	if c.project != "" {
		p += "?project=" + url.QueryEscape(c.project)
	}
	return p
}

// SetSecret creates a secret or replaces its value.
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	return c.do(ctx, c.http, http.MethodPut, c.secretPath("/"+url.PathEscape(name)), api.SecretValue{Value: value}, nil)
}

// Secret reads a secret's value (who set it, or an admin).
func (c *Client) Secret(ctx context.Context, name string) (string, error) {
	var v api.SecretValue
	err := c.do(ctx, c.http, http.MethodGet, c.secretPath("/"+url.PathEscape(name)), nil, &v)
	return v.Value, err
}

// Secrets lists the project's secrets, without their values.
func (c *Client) Secrets(ctx context.Context) ([]api.Secret, error) {
	var xs []api.Secret
	return xs, c.do(ctx, c.http, http.MethodGet, c.secretPath(""), nil, &xs)
}

// DeleteSecret removes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, c.http, http.MethodDelete, c.secretPath("/"+url.PathEscape(name)), nil, nil)
}
