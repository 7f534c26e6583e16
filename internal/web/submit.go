package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// maxUpload bounds a configuration pasted or uploaded on the submit page
// (the form's other fields are small).
const maxUpload = spec.DefaultScriptBytes + 1<<20

// submitPage is the empty form: a configuration to paste or upload and
// the project to submit it to.
func (u *UI) submitPage(w http.ResponseWriter, r *http.Request, s *session) {
	data, err := submitForm(r, s)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	u.render(w, r, http.StatusOK, "submit", data)
}

// submitForm is the submit page's data: the user's projects for the chooser.
func submitForm(r *http.Request, s *session) (map[string]any, error) {
	projects, err := s.c.Projects(r.Context(), false)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Who": s.who, "Projects": projects, "Source": "dashboard.yml"}, nil
}

// submit shows the plan of the configuration posted (action=plan) or
// submits it (action=submit) and goes to the new run's page. What the
// configuration or the API refuses is shown on the form, as
// file:line:col: field: message.
func (u *UI) submit(w http.ResponseWriter, r *http.Request, s *session) {
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload)
	data, err := submitForm(r, s)
	if err != nil {
		u.apiFailure(w, r, s, err)
		return
	}
	if err := r.ParseMultipartForm(maxUpload); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		data["Problems"] = []string{"the form could not be read: " + err.Error()}
		u.render(w, r, http.StatusOK, "submit", data)
		return
	}
	config, source := r.FormValue("config"), cleanSource(r.FormValue("source"))
	if f, h, err := r.FormFile("file"); err == nil {
		b, rerr := io.ReadAll(f)
		f.Close()
		if rerr != nil {
			data["Problems"] = []string{"the upload could not be read: " + rerr.Error()}
			u.render(w, r, http.StatusOK, "submit", data)
			return
		}
		if len(b) > 0 {
			config, source = string(b), cleanSource(h.Filename)
		}
	}
	project := r.FormValue("project")
	data["Config"], data["Source"], data["Project"] = config, source, project
	// The page answers 200 with the problems shown: the form loaded.
	fail := func(err error) {
		data["Problems"] = problems(err, source, []byte(config))
		u.render(w, r, http.StatusOK, "submit", data)
	}
	if strings.TrimSpace(config) == "" {
		fail(errors.New("paste a configuration or choose a file"))
		return
	}
	req, err := submitRequest(source, []byte(config), project)
	if err != nil {
		fail(err)
		return
	}
	if r.FormValue("action") != "submit" {
		plan, err := s.c.Plan(r.Context(), req)
		if err != nil {
			fail(err)
			return
		}
		data["Plan"], data["Task"] = plan, req.Spec
		u.render(w, r, http.StatusOK, "submit", data)
		return
	}
	run, err := s.c.Submit(r.Context(), req)
	if err != nil {
		fail(err)
		return
	}
	http.Redirect(w, r, Prefix+"runs/"+url.PathEscape(fmt.Sprint(run.ID)), http.StatusSeeOther)
}

// submitRequest parses a configuration as berth apply does. A fleet is
// berth apply's (it installs agents over SSH from the client's machine);
// an environment variable without a value has no environment to come
// from here.
func submitRequest(source string, data []byte, project string) (api.SubmitRequest, error) {
	if spec.ConfigType(data) == "fleet" {
		return api.SubmitRequest{}, fmt.Errorf("%s: type: fleet is applied with berth apply -f FILE (it installs the agent over SSH from your machine)", source)
	}
	t, err := spec.ParseLimits(source, data, spec.DefaultLimits)
	if err != nil {
		return api.SubmitRequest{}, err
	}
	if project != "" {
		t.Project = project
	}
	// A local repo or file is packed on the submitter's machine (berth
	// apply); the dashboard has no files to pack.
	var local spec.Errors
	for i, r := range t.Repos {
		if r.LocalPath != "" {
			local = append(local, localError(source, data, fmt.Sprintf("repos[%d]", i), r.LocalPath))
		}
	}
	for i, f := range t.Files {
		local = append(local, localError(source, data, fmt.Sprintf("files[%d]", i), f.LocalPath))
	}
	if len(local) > 0 {
		return api.SubmitRequest{}, local
	}
	if err := t.Env.Resolve(func(string) (string, bool) { return "", false }); err != nil {
		return api.SubmitRequest{}, fmt.Errorf("%s: env: the dashboard has no environment to take a value from; give each variable one (NAME=value): %w", source, err)
	}
	if err := t.ValidateLimits(spec.DefaultLimits); err != nil {
		return api.SubmitRequest{}, err
	}
	return api.SubmitRequest{Spec: t, Source: source}, nil
}

// problems lists what was refused, one line each; the API's refusal of a
// field is placed at the field's line in the configuration.
func problems(err error, source string, data []byte) []string {
	var es spec.Errors
	if errors.As(err, &es) {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Error()
		}
		return out
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Field != "" {
		if line, col, ok := spec.Locate(data, ae.Field); ok {
			msg := ae.Message
			if _, m, found := strings.Cut(msg, ae.Field+": "); found {
				msg = m
			}
			return []string{(&spec.Error{File: source, Line: line, Col: col, Field: ae.Field, Msg: msg}).Error()}
		}
	}
	return strings.Split(err.Error(), "\n")
}

// cleanSource keeps an uploaded file's base name for messages.
func cleanSource(name string) string {
	name = path.Base(strings.ReplaceAll(strings.TrimSpace(name), "\\", "/"))
	if name == "" || name == "." || name == "/" {
		return "dashboard.yml"
	}
	if len(name) > 100 {
		name = name[:100]
	}
	return name
}

func localError(source string, data []byte, field, p string) *spec.Error {
	line, col, _ := spec.Locate(data, field)
	return &spec.Error{File: source, Line: line, Col: col, Field: field,
		Msg: fmt.Sprintf("%s is on your machine: submit this configuration with berth apply, which packs and uploads it", p)}
}
