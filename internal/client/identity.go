package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// Users, tokens and nodes' tokens.

// WhoAmI says what the server makes of the client's credential.
func (c *Client) WhoAmI(ctx context.Context) (*api.WhoAmI, error) {
	var w api.WhoAmI
	return &w, c.do(ctx, c.http, http.MethodGet, "/whoami", nil, &w)
}

// CreateUser makes a user (admin only).
func (c *Client) CreateUser(ctx context.Context, req api.UserRequest) (*api.User, error) {
	var u api.User
	return &u, c.do(ctx, c.http, http.MethodPost, "/users", req, &u)
}

// Users lists the users (admin only).
func (c *Client) Users(ctx context.Context) ([]api.User, error) {
	var us []api.User
	return us, c.do(ctx, c.http, http.MethodGet, "/users", nil, &us)
}

// DeleteUser deletes a user and their tokens (admin only).
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/users/"+url.PathEscape(name), nil, nil)
}

// CreateToken makes a token; its Secret is in the answer, and only there.
func (c *Client) CreateToken(ctx context.Context, req api.TokenRequest) (*api.Token, error) {
	var t api.Token
	return &t, c.do(ctx, c.http, http.MethodPost, "/tokens", req, &t)
}

// CreateNodeToken makes a node's credential (admin only).
func (c *Client) CreateNodeToken(ctx context.Context, node string, req api.NodeTokenRequest) (*api.Token, error) {
	var t api.Token
	return &t, c.do(ctx, c.http, http.MethodPost, "/nodes/"+url.PathEscape(node)+"/tokens", req, &t)
}

// Tokens lists the caller's tokens (an admin's: every token, nodes' too;
// user narrows them to one user's).
func (c *Client) Tokens(ctx context.Context, user string) ([]api.Token, error) {
	q := ""
	if user != "" {
		q = "?user=" + url.QueryEscape(user)
	}
	var ts []api.Token
	return ts, c.do(ctx, c.http, http.MethodGet, "/tokens"+q, nil, &ts)
}

// RevokeToken revokes a token by ID.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/tokens/"+url.PathEscape(id), nil, nil)
}
