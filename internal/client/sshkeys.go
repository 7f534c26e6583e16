package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-hq/berth/internal/api"
)

// AddSSHKey registers a public key (a .pub file's line) for the caller.
func (c *Client) AddSSHKey(ctx context.Context, publicKey string) (*api.SSHKey, error) {
	var k api.SSHKey
	if err := c.do(ctx, c.http, http.MethodPost, "/ssh-keys", api.SSHKeyAdd{PublicKey: publicKey}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// SSHKeys lists the caller's keys (an admin's: everyone's, or user's).
func (c *Client) SSHKeys(ctx context.Context, user string) ([]api.SSHKey, error) {
	q := ""
	if user != "" {
		q = "?user=" + url.QueryEscape(user)
	}
	var ks []api.SSHKey
	return ks, c.do(ctx, c.http, http.MethodGet, "/ssh-keys"+q, nil, &ks)
}

// RemoveSSHKey removes a key by its fingerprint.
func (c *Client) RemoveSSHKey(ctx context.Context, fingerprint string) error {
	return c.do(ctx, c.http, http.MethodDelete, "/ssh-keys/"+url.PathEscape(fingerprint), nil, nil)
}
