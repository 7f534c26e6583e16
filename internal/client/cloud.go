package client

import (
	"context"
	"net/http"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/provider"
)

// Offers lists what the server's providers can lend that q matches,
// cheapest first.
func (c *Client) Offers(ctx context.Context, q provider.Query) ([]provider.Offer, error) {
	var out []provider.Offer
	return out, c.do(ctx, c.http, http.MethodPost, "/offers", api.OffersRequest{Query: q}, &out)
}

// Instances lists the backend fleets' instances (all: gone ones too).
func (c *Client) Instances(ctx context.Context, all bool) ([]api.Instance, error) {
	path := "/instances"
	if all {
		path += "?all=1"
	}
	var out []api.Instance
	return out, c.do(ctx, c.http, http.MethodGet, path, nil, &out)
}
