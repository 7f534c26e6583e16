package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// Secrets of the caller's project.

// SetSecret creates a secret or replaces its value.
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	return c.do(ctx, c.http, http.MethodPut, "/secrets/"+url.PathEscape(name), api.SecretValue{Value: value}, nil)
}

// Secret reads a secret's value (who set it, or an admin).
func (c *Client) Secret(ctx context.Context, name string) (string, error) {
	var v api.SecretValue
	err := c.do(ctx, c.http, http.MethodGet, "/secrets/"+url.PathEscape(name), nil, &v)
	return v.Value, err
}

// Secrets lists the project's secrets, without their values.
func (c *Client) Secrets(ctx context.Context) ([]api.Secret, error) {
	var xs []api.Secret
	return xs, c.do(ctx, c.http, http.MethodGet, "/secrets", nil, &xs)
}

// DeleteSecret removes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/secrets/"+url.PathEscape(name), nil, nil)
}
