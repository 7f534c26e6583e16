package api

import "time"

// SignInCode is a one-time code that signs its user into the dashboard
// (POST /api/v1/signin-codes; berth ui): good once, until ExpiresAt. URL is
// the dashboard's page that takes it, as the server was reached.
type SignInCode struct {
	Code      string    `json:"code"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SignInRedeem trades a sign-in code for a token of its user (POST
// /api/v1/signin-codes/redeem, no credential: the code is one).
type SignInRedeem struct {
	Code string `json:"code"`
}
