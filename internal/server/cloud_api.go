package server

import (
	"encoding/json"
	"net/http"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/store"
)

// handleOffers answers `berth offer`: the configured providers' offers
// that the query matches, cheapest first.
func (s *Server) handleOffers(w http.ResponseWriter, r *http.Request, _ *store.User) {
	var req api.OffersRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	out, err := s.offers(r.Context(), req.Query)
	if err != nil {
		writeError(w, err)
		return
	}
	if out == nil {
		out = []provider.Offer{}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleInstances lists the backend fleets' instances (?all=1: gone ones
// too).
func (s *Server) handleInstances(w http.ResponseWriter, r *http.Request, _ *store.User) {
	recs, err := s.store.ListInstances(r.Context(), r.URL.Query().Get("all") != "")
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]api.Instance, 0, len(recs))
	for _, x := range recs {
		in := api.Instance{Key: x.Key, Fleet: x.Fleet, Node: x.Node, State: x.State, Detail: x.Detail, CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
		_ = json.Unmarshal([]byte(x.Offer), &in.Offer)
		out = append(out, in)
	}
	writeJSON(w, http.StatusOK, out)
}
