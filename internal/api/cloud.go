package api

import (
	"time"

	"github.com/berth-hq/berth/internal/provider"
)

// OffersRequest asks what the configured providers can lend (POST
// /offers); the answer is []provider.Offer, cheapest first.
type OffersRequest struct {
	Query provider.Query `json:"query"`
}

// Instance is one machine a backend fleet holds (GET /instances).
type Instance struct {
	Key       string         `json:"key"`
	Fleet     string         `json:"fleet"`
	Node      string         `json:"node"`
	State     string         `json:"state"` // creating, active, terminating, gone
	Detail    string         `json:"detail,omitempty"`
	NodeState string         `json:"node_state,omitempty"` // its node's status; "" before it joins
	Offer     provider.Offer `json:"offer"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}
