package server

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// Secrets (issue 15): a project's named values, sealed with AES-256-GCM
// under a key that is never in the database (BERTH_SECRETS_KEY, or a file
// beside it), put into a job's env, commands and registry_auth only as the
// assignment leaves for the agent (handOff), and masked in the job's
// stored log (secrets_mask.go).

// SecretsKeyEnv holds the secrets key, base64 of 32 bytes; without it the
// server keeps one in SecretsKeyFile of its state directory.
const (
	SecretsKeyEnv  = "BERTH_SECRETS_KEY"
	SecretsKeyFile = "secrets.key"
)

// maxSecretBytes bounds a secret's value.
const maxSecretBytes = 64 << 10

// LoadSecretsKey returns the secrets key and where it came from (for
// messages): $BERTH_SECRETS_KEY when set, else dir/secrets.key, made
// (mode 0600, 32 random bytes in base64) when missing.
func LoadSecretsKey(dir string, getenv func(string) string) (key []byte, source string, err error) {
	if v := getenv(SecretsKeyEnv); v != "" {
		key, err := decodeKey(v)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", SecretsKeyEnv, err)
		}
		return key, SecretsKeyEnv, nil
	}
	path := filepath.Join(dir, SecretsKeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("secrets key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil {
				return key, path, nil
			}
			_ = os.Remove(path)
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", fmt.Errorf("secrets key: %w", err)
		}
		b, err = os.ReadFile(path) // another process made it first
	}
	if err != nil {
		return nil, "", fmt.Errorf("secrets key: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, "", fmt.Errorf("secrets key %s is readable by others (%v) and cannot be made 0600: %w", path, fi.Mode().Perm(), err)
		}
	}
	key, err = decodeKey(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("secrets key %s: %w", path, err)
	}
	return key, path, nil
}

func decodeKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(key) != 32 {
		return nil, errors.New("want 32 bytes in base64 (e.g. from `head -c 32 /dev/urandom | base64`)")
	}
	return key, nil
}

// secretBox seals and opens secrets' values, and holds every project's
// opened values for the hand-off and the log masking (which must not read
// the store: they run after a commit, and under the state lock).
type secretBox struct {
	aead   cipher.AEAD // nil: no key configured, secrets are off
	source string

	mu   sync.RWMutex
	vals map[int64]map[string]string // project → name → value
	mask masker                      // secrets_mask.go
}

// secretsCheck is a constant sealed under the key in server_keys: a
// server started with another key finds out at once, not at a job's start.
const secretsCheck = "berth-secrets-check"

// openSecrets sets up the box from the configured key and reads every
// secret: a key that is not the one they were sealed with stops the start.
func (s *Server) openSecrets(ctx context.Context) error {
	b := &s.secrets
	b.vals = map[int64]map[string]string{}
	b.mask.init()
	if s.cfg.SecretsKey == nil {
		return nil
	}
	block, err := aes.NewCipher(s.cfg.SecretsKey)
	if err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	b.aead, _ = cipher.NewGCM(block)
	b.source = s.cfg.SecretsKeySource
	if b.source == "" {
		b.source = "the configured key"
	}
	mismatch := func(what string) error {
		return fmt.Errorf("secrets: %s does not open %s: it is not the key the database's secrets were sealed with; "+
			"start with that key (%s, or %s in the state directory), see docs/operations.md", b.source, what, SecretsKeyEnv, SecretsKeyFile)
	}
	check, err := s.store.EnsureKey(ctx, "secrets-check", base64.StdEncoding.EncodeToString(b.seal(0, secretsCheck, []byte(secretsCheck))))
	if err != nil {
		return err
	}
	sealed, err := base64.StdEncoding.DecodeString(check)
	if err != nil {
		return mismatch("the stored check value")
	}
	if v, err := b.open(0, secretsCheck, sealed); err != nil || string(v) != secretsCheck {
		return mismatch("the stored check value")
	}
	all, err := s.store.ListSecrets(ctx, 0)
	if err != nil {
		return err
	}
	for _, x := range all {
		v, err := b.open(x.ProjectID, x.Name, x.Value)
		if err != nil {
			return mismatch(fmt.Sprintf("secret %q of project %d", x.Name, x.ProjectID))
		}
		b.put(x.ProjectID, x.Name, string(v))
	}
	return nil
}

// aad binds a sealed value to its project and name: a row copied onto
// another name or project does not open.
func aad(project int64, name string) []byte {
	return []byte("berth-secret\x00" + strconv.FormatInt(project, 10) + "\x00" + name)
}

func (b *secretBox) seal(project int64, name string, value []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(value)+b.aead.Overhead())
	_, _ = rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, value, aad(project, name))
}

func (b *secretBox) open(project int64, name string, sealed []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("secrets: sealed value too short")
	}
	return b.aead.Open(nil, sealed[:n], sealed[n:], aad(project, name))
}

func (b *secretBox) put(project int64, name, value string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.vals[project] == nil {
		b.vals[project] = map[string]string{}
	}
	b.vals[project][name] = value
}

func (b *secretBox) drop(project int64, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.vals[project], name)
}

// values are a project's secrets by name (a copy).
func (b *secretBox) values(project int64) map[string]string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make(map[string]string, len(b.vals[project]))
	for k, v := range b.vals[project] {
		out[k] = v
	}
	return out
}

func (b *secretBox) has(project int64, name string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.vals[project][name]
	return ok
}

// secretOp is what a user does with a project's secrets.
type secretOp int

const (
	secretList   secretOp = iota // names and who set them
	secretSet                    // create or replace a value
	secretRead                   // a value
	secretDelete                 // remove one
)

// maySecrets is the one access rule of secrets; setBy is the user who
// last set the secret (for secretRead and secretDelete). A project's
// members list its secrets' names and set values; only the user who last
// set a secret, the project's admins, or a global admin read its value or
// delete it.
func (s *Server) maySecrets(u *store.User, projectID int64, op secretOp, setBy int64) bool {
	if u == nil || !s.mayRead(u, projectID) {
		return false
	}
	switch op {
	case secretList, secretSet:
		return true
	}
	return u.ID == setBy || s.mayAdmin(u, projectID)
}

// secretsProject is the project a secrets request is about: ?project=NAME
// among the caller's projects, else their default one. A node's or a
// job's credential has none (the request is refused, 403).
func (s *Server) secretsProject(r *http.Request, u *store.User) (int64, error) {
	if u == nil {
		return 0, fmt.Errorf("%w: secrets are users'", ErrForbidden)
	}
	pid, _, err := s.projectFor(r.Context(), u, r.URL.Query().Get("project"))
	return pid, err
}

func (s *Server) secretsOn() error {
	if s.secrets.aead == nil {
		return fmt.Errorf("%w: secrets are off: this server has no secrets key (Config.SecretsKey)", ErrUnavailable)
	}
	return nil
}

func secretName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if m := spec.ValidSecretName(name); m != "" {
		return "", fmt.Errorf("%w: %s", ErrInvalid, m)
	}
	return name, nil
}

func (s *Server) handleSecretList(w http.ResponseWriter, r *http.Request, u *store.User) {
	pid, err := s.secretsProject(r, u)
	if err != nil {
		writeError(w, err)
		return
	}
	if !s.maySecrets(u, pid, secretList, 0) {
		writeError(w, fmt.Errorf("%w: listing secrets", ErrForbidden))
		return
	}
	xs, err := s.store.ListSecrets(r.Context(), pid)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]api.Secret, 0, len(xs))
	for _, x := range xs {
		out = append(out, api.Secret{Name: x.Name, Project: s.name(r.Context(), 'p', x.ProjectID), SetBy: s.name(r.Context(), 'u', x.SetBy),
			CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleSecretSet(w http.ResponseWriter, r *http.Request, u *store.User) {
	var req api.SecretValue
	pid, err := s.secretsProject(r, u)
	name := ""
	if err == nil {
		name, err = secretName(r)
	}
	if err == nil {
		err = s.secretsOn()
	}
	if err == nil {
		err = decodeLimit(r, &req, 2*maxSecretBytes)
	}
	switch {
	case err != nil:
	case !s.maySecrets(u, pid, secretSet, 0):
		err = fmt.Errorf("%w: setting secrets", ErrForbidden)
	case req.Value == "":
		err = fmt.Errorf("%w: secret %s: the value is empty", ErrInvalid, name)
	case len(req.Value) > maxSecretBytes:
		err = fmt.Errorf("%w: secret %s: the value is %d bytes, at most %d", ErrInvalid, name, len(req.Value), maxSecretBytes)
	}
	if err == nil {
		err = s.store.PutSecret(r.Context(), &store.Secret{ProjectID: pid, Name: name, SetBy: u.ID,
			Value: s.secrets.seal(pid, name, []byte(req.Value))})
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.secrets.put(pid, name, req.Value)
	s.log.Info("secret set", "secret", name, "project", s.name(r.Context(), 'p', pid), "by", u.Name)
	writeJSON(w, http.StatusOK, api.SecretValue{Name: name})
}

func (s *Server) handleSecretGet(w http.ResponseWriter, r *http.Request, u *store.User) {
	pid, err := s.secretsProject(r, u)
	name := ""
	if err == nil {
		name, err = secretName(r)
	}
	if err == nil {
		err = s.secretsOn()
	}
	var x *store.Secret
	if err == nil {
		x, err = s.store.GetSecret(r.Context(), pid, name)
	}
	if err == nil && !s.maySecrets(u, pid, secretRead, x.SetBy) {
		err = fmt.Errorf("%w: secret %s: only who set it (%s), the project's admins or an admin may read its value", ErrForbidden, name, s.name(r.Context(), 'u', x.SetBy))
	}
	var v []byte
	if err == nil {
		if v, err = s.secrets.open(x.ProjectID, x.Name, x.Value); err != nil {
			err = fmt.Errorf("secret %s does not open with %s: %w", name, s.secrets.source, err)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.log.Info("secret read", "secret", name, "by", u.Name)
	writeJSON(w, http.StatusOK, api.SecretValue{Name: name, Value: string(v)})
}

func (s *Server) handleSecretDelete(w http.ResponseWriter, r *http.Request, u *store.User) {
	pid, err := s.secretsProject(r, u)
	name := ""
	if err == nil {
		name, err = secretName(r)
	}
	var x *store.Secret
	if err == nil {
		x, err = s.store.GetSecret(r.Context(), pid, name)
	}
	if err == nil && !s.maySecrets(u, pid, secretDelete, x.SetBy) {
		err = fmt.Errorf("%w: secret %s: only who set it (%s), the project's admins or an admin may delete it", ErrForbidden, name, s.name(r.Context(), 'u', x.SetBy))
	}
	if err == nil {
		err = s.store.DeleteSecret(r.Context(), pid, name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.secrets.drop(pid, name)
	s.log.Info("secret deleted", "secret", name, "by", u.Name)
	w.WriteHeader(http.StatusNoContent)
}

// checkSecretRefs refuses a configuration that references a secret its
// project does not have, naming the file and the field (the client shows
// the line: api.Error.Field).
func (s *Server) checkSecretRefs(t *spec.Task, source string, project int64) error {
	for _, ref := range t.SecretRefs() {
		if s.secrets.has(project, ref.Name) {
			continue
		}
		var known []string
		for k := range s.secrets.values(project) {
			known = append(known, k)
		}
		slices.Sort(known)
		hint := "none is set"
		if len(known) > 0 {
			hint = "known: " + strings.Join(known, ", ")
		}
		return fmt.Errorf("%w: %w", ErrInvalid, &spec.Error{File: source, Field: ref.Field,
			Msg: fmt.Sprintf("unknown secret %q in project %s (%s): set it with `berth secret set %s`", ref.Name, s.name(context.Background(), 'p', project), hint, ref.Name)})
	}
	return nil
}

// handOff readies an agent's message to leave: each job gets its run's
// credential and its project's secrets put in where the configuration
// references them (env values, commands, registry_auth). Nothing else
// ever holds the values: not the cluster, the store, the run's JSON.
// A secret deleted since the submission fails the job with a message in
// its log, rather than run it with the reference as text.
func (s *Server) handOff(m api.AgentMessage) api.AgentMessage {
	if len(m.Jobs) == 0 {
		return m
	}
	jobs := make([]api.Assignment, len(m.Jobs))
	for i, a := range m.Jobs {
		a.JobToken = s.jobToken(a.RunID)
		jobs[i] = s.putGitCredentials(s.putSecrets(a)) // clones.go
	}
	m.Jobs = jobs
	return m
}

func (s *Server) putSecrets(a api.Assignment) api.Assignment {
	uses := func(x string) bool { return strings.Contains(x, "${{") }
	any := slices.ContainsFunc(a.Commands, uses) || slices.ContainsFunc(a.Env, uses) ||
		a.Container != nil && a.Container.RegistryAuth != nil && (uses(a.Container.RegistryAuth.Username) || uses(a.Container.RegistryAuth.Password))
	if !any {
		return a
	}
	vals := s.secrets.values(a.ProjectID)
	var missing, used []string
	expand := func(x string) string {
		out, miss := spec.ExpandSecrets(x, vals)
		missing = append(missing, miss...)
		for _, name := range spec.SecretRefsIn(x) {
			if v, ok := vals[name]; ok {
				used = append(used, v)
			}
		}
		return out
	}
	// The slices are the cluster's (the run's configuration): copies.
	cmds := make([]string, len(a.Commands))
	for i, c := range a.Commands {
		cmds[i] = expand(c)
	}
	env := make([]string, len(a.Env))
	for i, kv := range a.Env {
		env[i] = expand(kv)
	}
	a.Commands, a.Env = cmds, env
	if a.Container != nil && a.Container.RegistryAuth != nil {
		c := *a.Container
		ra := *c.RegistryAuth
		ra.Username, ra.Password = expand(ra.Username), expand(ra.Password)
		c.RegistryAuth = &ra
		a.Container = &c
	}
	s.secrets.mask.addRun(a.RunID, used)
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		s.log.Warn("a job's secrets are gone: it fails", "run_id", a.RunID, "job_id", a.JobID, "secrets", strings.Join(missing, ","))
		a.Commands = []string{fmt.Sprintf("echo 'berth: secret %s was deleted after the run was submitted: the job cannot start' >&2; exit 1",
			strings.Join(missing, ", "))}
	}
	return a
}
