package client

import (
	"context"
	"net/http"

	"github.com/berth-hq/berth/internal/api"
)

// SignInCode asks for a one-time code that signs the caller into the
// dashboard (berth ui).
func (c *Client) SignInCode(ctx context.Context) (*api.SignInCode, error) {
	var out api.SignInCode
	return &out, c.do(ctx, c.http, http.MethodPost, "/signin-codes", struct{}{}, &out)
}

// RedeemSignInCode trades a code for a token of its user (the dashboard's
// sign-in).
func (c *Client) RedeemSignInCode(ctx context.Context, code string) (*api.Token, error) {
	var out api.Token
	return &out, c.do(ctx, c.http, http.MethodPost, "/signin-codes/redeem", api.SignInRedeem{Code: code}, &out)
}
