package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// The OpenAI-compatible endpoint (issue 16): /proxy/models/PROJECT/ is a
// base URL for OpenAI clients. GET …/models lists the project's services
// that declare a `model`; any other request names its model in the JSON
// body's "model" and goes to that service at the model's prefix (default
// /v1): POST /proxy/models/main/chat/completions → POST /v1/chat/completions
// on a replica. A project member's token is always required.

// maxModelBody bounds a model request's body, read whole to find "model".
const maxModelBody = 16 << 20

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("project")
	rest := strings.TrimPrefix(r.PathValue("rest"), "/")
	p, err := s.store.ProjectByName(r.Context(), project)
	notFound := fmt.Errorf("%w: project %s not found", ErrNotFound, project)
	if err != nil {
		writeError(w, notFound)
		return
	}
	pr, err := s.authenticate(r)
	if err == nil {
		err = pr.userOnly()
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.mayRead(pr.user, p.ID) {
		writeError(w, notFound)
		return
	}
	s.svcInit()
	if rest == "models" && r.Method == http.MethodGet {
		type model struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			OwnedBy string `json:"owned_by"`
		}
		out := struct {
			Object string  `json:"object"`
			Data   []model `json:"data"`
		}{Object: "list", Data: []model{}}
		s.svc.mu.Lock()
		for k, info := range s.svc.byKey {
			if k.project == p.ID && info.row != nil && info.task.Model != nil {
				out.Data = append(out.Data, model{ID: info.task.Model.Name, Object: "model", Created: info.row.CreatedAt.Unix(), OwnedBy: project})
			}
		}
		s.svc.mu.Unlock()
		slices.SortFunc(out.Data, func(a, b model) int { return strings.Compare(a.ID, b.ID) })
		writeJSON(w, http.StatusOK, out)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxModelBody+1))
	if err != nil || len(body) > maxModelBody {
		writeError(w, fmt.Errorf("%w: the request body: at most %d bytes of JSON naming a \"model\"", ErrInvalid, maxModelBody))
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		writeError(w, fmt.Errorf("%w: the request body must be JSON naming a \"model\"", ErrInvalid))
		return
	}
	var info *svcInfo
	prefix := "/v1"
	s.svc.mu.Lock()
	for k, x := range s.svc.byKey {
		if k.project == p.ID && x.row != nil && x.task.Model != nil && x.task.Model.Name == req.Model {
			info = x
			if x.task.Model.Prefix != "" {
				prefix = strings.TrimSuffix(x.task.Model.Prefix, "/")
			}
		}
	}
	s.svc.mu.Unlock()
	if info == nil {
		writeError(w, fmt.Errorf("%w: no service of project %s serves model %q", ErrNotFound, project, req.Model))
		return
	}
	r.Header.Del("Authorization") // Berth's token, not the service's
	path := func(string) string { return prefix + "/" + rest }
	s.proxyService(w, r, info, project+"/"+info.key.name, "/proxy/models/"+project, path, body, true)
}
