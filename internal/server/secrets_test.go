package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/store"
)

// testKey is a fresh secrets key per test.
func testKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func randomValue(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// fakeAgent is a node's agent spoken by hand over HTTP: it registers,
// reads its assignment stream, and reports what the test says.
type fakeAgent struct {
	t     *testing.T
	h     *harness
	name  string
	token string
	msgs  chan api.AgentMessage
}

func startFakeAgent(t *testing.T, h *harness, name, containers string) *fakeAgent {
	t.Helper()
	nt, err := h.c.CreateNodeToken(context.Background(), name, api.NodeTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAgent{t: t, h: h, name: name, token: nt.Secret, msgs: make(chan api.AgentMessage, 64)}
	info, _ := json.Marshal(api.NodeInfo{Name: name, Fleet: name, Addr: "127.0.0.1", CPUs: 2, Memory: 1 << 30, Containers: containers})
	if code, body := call(t, h, "POST", a.token, "/agent/register", string(info)); code != 200 {
		t.Fatalf("register %s: %d %s", name, code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", h.http.URL+api.Version+"/agent/stream?node="+name, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m api.AgentMessage
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				a.msgs <- m
			}
		}
	}()
	return a
}

// assignment waits for the stream to carry run's job.
func (a *fakeAgent) assignment(run int64) api.Assignment {
	a.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-a.msgs:
			for _, j := range m.Jobs {
				if j.RunID == run {
					return j
				}
			}
		case <-deadline:
			a.t.Fatalf("no assignment of run %d", run)
		}
	}
}

func (a *fakeAgent) report(evs ...api.AgentEvent) {
	a.t.Helper()
	body, _ := json.Marshal(api.AgentEvents{Node: a.name, Events: evs})
	if code, out := call(a.t, a.h, "POST", a.token, "/agent/events", string(body)); code != 200 {
		a.t.Fatalf("report: %d %s", code, out)
	}
}

// frames are log events for data, one frame each, from offset at.
func frames(job int64, at int64, data ...string) ([]api.AgentEvent, int64) {
	var evs []api.AgentEvent
	for _, d := range data {
		size := api.LogFrameHeader + int64(len(d))
		evs = append(evs, api.AgentEvent{JobID: job, Type: "log", Time: time.Now(), Offset: at, Size: size, Stream: "stdout", Data: []byte(d)})
		at += size
	}
	return evs, at
}

func readLog(t *testing.T, h *harness, ref string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	if _, err := h.c.Logs(ctx, ref, client.LogOptions{Follow: true, Job: -1}, func(e api.LogEntry) { out.Write(e.Data) }); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// The test: runs that use secrets in env, commands and
// registry_auth, and print them (one of them split across two frames),
// leave no secret's value in the database file or its WAL, the server's
// log output, or any API answer (the runs' JSON with their
// configuration, the listing, the logs, the events, the secrets' list);
// the agent alone got the values, and the stored logs show ***.
func TestSecretsNeverStoredOrShown(t *testing.T) {
	if onPostgres(t) {
		t.Skip("greps the SQLite file")
	}
	var logs lockedBuffer
	dir := t.TempDir()
	h := newHarnessCfg(t, dir, "127.0.0.1:0", func(c *Config) {
		c.SecretsKey = testKey(t)
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := context.Background()
	tok, pw, user := randomValue("tok-"), randomValue("pw-"), randomValue("user-")
	for name, v := range map[string]string{"tok": tok, "pw": pw, "user": user} {
		if err := h.c.SetSecret(ctx, name, v); err != nil {
			t.Fatal(err)
		}
	}

	// A real agent runs a job that prints the secret from env and from
	// its commands, and once in two writes far apart (two frames).
	startAgent(t, h, agentOpts{name: "n1", cpus: 2})
	r1 := submit(t, h, `
type: task
name: prints
env:
  - TOK=${{ secrets.tok }}
commands:
  - echo "env=$TOK"
  - echo "cmd=${{ secrets.tok }}"
  - printf '%s' "${TOK:0:6}"; sleep 0.5; printf '%s\n' "${TOK:6}"
`)
	out, end := follow(t, h, r1.ID)
	if want := "env=***\ncmd=***\n***\n"; out != want || end.Status != api.StatusDone {
		t.Errorf("the job's stored output = %q (%s), want %q", out, end.Status, want)
	}

	// A container run on a node whose agent the test speaks for: the
	// assignment, and only it, carries the values.
	fake := startFakeAgent(t, h, "fake", "docker 1.41")
	r2 := submit(t, h, `
type: task
name: pulls
image: registry.example/private:1
fleets: [fake]
registry_auth:
  username: ${{ secrets.user }}
  password: ${{ secrets.pw }}
env:
  - PW=${{ secrets.pw }}
commands:
  - echo ${{ secrets.tok }}
`)
	a := fake.assignment(r2.ID)
	if a.Container == nil || a.Container.RegistryAuth == nil || a.Container.RegistryAuth.Username != user || a.Container.RegistryAuth.Password != pw {
		t.Fatalf("the agent's registry_auth: %+v", a.Container)
	}
	if !strings.Contains(strings.Join(a.Env, "\n"), "PW="+pw) || a.Commands[0] != "echo "+tok {
		t.Fatalf("the agent's env/commands not resolved: %v %v", a.Env, a.Commands)
	}
	// The password split across two frames, the user name whole, then
	// the start of a value that never completes: released at the end.
	evs, _ := frames(a.JobID, 0, "pw="+pw[:5], pw[5:]+"\nuser="+user+"\n", "tail "+tok[:3])
	fake.report(append([]api.AgentEvent{{JobID: a.JobID, Type: "started", Time: time.Now()}}, evs...)...)
	fake.report(api.AgentEvent{JobID: a.JobID, Type: "exited", Time: time.Now(), Message: "pulled as " + user})
	if got, want := readLog(t, h, "pulls"), "pw=***\nuser=***\ntail "+tok[:3]; got != want {
		t.Errorf("the stored log = %q, want %q", got, want)
	}

	// Every answer of the API about them.
	var answers []string
	for _, path := range []string{"/runs/prints", "/runs/pulls", "/runs?all=1&jobs=1&spec=1", "/runs/prints/logs", "/runs/pulls/logs",
		"/secrets", "/nodes", "/steps"} {
		code, body := call(t, h, "GET", testToken, path, "")
		if code != 200 {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
		answers = append(answers, "GET "+path+": "+body)
	}
	all := strings.Join(answers, "\n")
	if !strings.Contains(all, "${{ secrets.pw }}") || !strings.Contains(all, `"agent"`) {
		t.Fatalf("the answers lack the runs' configuration or events (the test would prove nothing):\n%s", all)
	}
	h.close()
	db := filepath.Join(dir, "berth.db")
	files := map[string][]byte{"the server's log": []byte(logs.String()), "the API's answers": []byte(all)}
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if b, err := os.ReadFile(p); err == nil {
			files[p] = b
		}
	}
	if len(files[db]) == 0 {
		t.Fatal("no database file to grep")
	}
	for what, b := range files {
		for name, v := range map[string]string{"tok": tok, "pw": pw, "user": user} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds secret %s's value", what, name)
			}
		}
	}
}

// A submission (or a plan) naming a secret the project lacks is refused
// with the field, and stores nothing.
func TestUnknownSecretRefused(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SecretsKey = testKey(t) })
	ctx := context.Background()
	if err := h.c.SetSecret(ctx, "known", "value-1"); err != nil {
		t.Fatal(err)
	}
	req := api.SubmitRequest{Source: "job.yml", Spec: task(t, "type: task\nenv:\n  - A=${{ secrets.known }}\n  - B=${{ secrets.nope }}\ncommands: [\"true\"]\n")}
	_, perr := h.c.Plan(ctx, req)
	_, serr := h.c.Submit(ctx, req)
	for what, err := range map[string]error{"plan": perr, "submit": serr} {
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != "env[1]" ||
			!strings.Contains(apiErr.Message, `job.yml: env[1]: unknown secret "nope" in project main (known: known)`) {
			t.Errorf("%s: %#v, want a 400 naming job.yml, env[1] and the secret", what, err)
		}
	}
	runs, err := h.st.ListRuns(ctx, storeAll(h))
	if err != nil || len(runs) != 0 {
		t.Errorf("runs stored: %v %v", runs, err)
	}
}

// Values are sealed: the row is not the value and does not hold it; a
// server started with another key stops at once with a clear message
// (never garbage), and with the right key reads it back.
func TestSecretsEncryption(t *testing.T) {
	if onPostgres(t) {
		t.Skip("reads the SQLite file")
	}
	dir := t.TempDir()
	key := testKey(t)
	h := newHarnessCfg(t, dir, "127.0.0.1:0", func(c *Config) { c.SecretsKey, c.SecretsKeySource = key, "test key" })
	ctx := context.Background()
	v := randomValue("sealed-")
	if err := h.c.SetSecret(ctx, "s", v); err != nil {
		t.Fatal(err)
	}
	h.close()
	db, err := sql.Open("sqlite", filepath.Join(dir, "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	var row []byte
	if err := db.QueryRow(`SELECT value FROM secrets WHERE name = 's'`).Scan(&row); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(row) < len(v)+16 || bytes.Contains(row, []byte(v)) {
		t.Errorf("the stored row (%d bytes) is not a ciphertext of the value", len(row))
	}
	// Another key.
	st := harnessStore(t, ctx, dir)
	_, err = New(ctx, Config{Store: st, SecretsKey: testKey(t), SecretsKeySource: "BERTH_SECRETS_KEY"})
	st.Close()
	if err == nil || !strings.Contains(err.Error(), "BERTH_SECRETS_KEY does not open") || !strings.Contains(err.Error(), "not the key") {
		t.Fatalf("a wrong key: %v", err)
	}
	// The right one.
	h = newHarnessCfg(t, dir, "127.0.0.1:0", func(c *Config) { c.SecretsKey = key })
	if got, err := h.c.Secret(ctx, "s"); err != nil || got != v {
		t.Errorf("read back: %q %v", got, err)
	}
}

// The key comes from BERTH_SECRETS_KEY, else a file made once (0600) and
// read after; a bad one is refused.
func TestLoadSecretsKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "server")
	noEnv := func(string) string { return "" }
	k1, src, err := LoadSecretsKey(dir, noEnv)
	if err != nil || len(k1) != 32 || src != filepath.Join(dir, SecretsKeyFile) {
		t.Fatalf("first: %v %q %v", len(k1), src, err)
	}
	fi, err := os.Stat(src)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	k2, _, err := LoadSecretsKey(dir, noEnv)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("second start got another key: %v", err)
	}
	want := testKey(t)
	env := func(k string) string {
		if k == SecretsKeyEnv {
			return base64.StdEncoding.EncodeToString(want)
		}
		return ""
	}
	if k, src, err := LoadSecretsKey(dir, env); err != nil || !bytes.Equal(k, want) || src != SecretsKeyEnv {
		t.Errorf("from the env: %v %q %v", k, src, err)
	}
	if _, _, err := LoadSecretsKey(dir, func(string) string { return "c2hvcnQ=" }); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Errorf("a short key: %v", err)
	}
}

// Who may do what: any user lists and sets; only who set a secret, or an
// admin, reads or deletes it; a node's credential nothing.
func TestSecretsAccess(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SecretsKey = testKey(t) })
	ctx := context.Background()
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob"} {
		if _, err := h.c.CreateUser(ctx, api.UserRequest{Name: u}); err != nil {
			t.Fatal(err)
		}
		tk, err := h.c.CreateToken(ctx, api.TokenRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tk.Secret
	}
	nt, err := h.c.CreateNodeToken(ctx, "n1", api.NodeTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		who, method, path, body string
		want                    int
	}{
		{"alice", "PUT", "/secrets/a", `{"value":"alice-value"}`, 200},
		{"bob", "GET", "/secrets", "", 200},
		{"bob", "GET", "/secrets/a", "", 403},
		{"bob", "DELETE", "/secrets/a", "", 403},
		{"alice", "GET", "/secrets/a", "", 200},
		{"admin", "GET", "/secrets/a", "", 200},
		{"node", "GET", "/secrets", "", 403},
		{"node", "GET", "/secrets/a", "", 403},
		{"node", "PUT", "/secrets/b", `{"value":"node-value"}`, 403},
		{"", "GET", "/secrets", "", 401},
		{"bob", "PUT", "/secrets/bad.name", `{"value":"x"}`, 400},
		{"bob", "PUT", "/secrets/empty", `{"value":""}`, 400},
		{"bob", "PUT", "/secrets/a", `{"value":"bob-value"}`, 200}, // bob set it last: his now
		{"alice", "GET", "/secrets/a", "", 403},
		{"bob", "GET", "/secrets/a", "", 200},
		{"bob", "DELETE", "/secrets/a", "", 204},
		{"bob", "GET", "/secrets/a", "", 404},
	}
	tokens["admin"], tokens["node"] = testToken, nt.Secret
	for i, s := range steps {
		code, body := call(t, h, s.method, tokens[s.who], s.path, s.body)
		if code != s.want {
			t.Errorf("step %d: %s %s %s: %d %s, want %d", i, s.who, s.method, s.path, code, body, s.want)
		}
		if s.path == "/secrets" && code == 200 && strings.Contains(body, "value") {
			t.Errorf("the listing shows values: %s", body)
		}
	}
}

// A secret deleted after the submission fails the job with a message in
// its log, instead of running it with the reference as text.
func TestSecretDeletedBeforeStart(t *testing.T) {
	h := newHarnessCfg(t, t.TempDir(), "127.0.0.1:0", func(c *Config) { c.SecretsKey = testKey(t) })
	ctx := context.Background()
	if err := h.c.SetSecret(ctx, "gone", "soon-gone"); err != nil {
		t.Fatal(err)
	}
	r := submit(t, h, "type: task\ncommands:\n  - echo ${{ secrets.gone }}\n")
	if err := h.c.DeleteSecret(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	startAgent(t, h, agentOpts{name: "n1", cpus: 1})
	out, end := follow(t, h, r.ID)
	if end.Status != api.StatusFailed || !strings.Contains(out, "berth: secret gone was deleted after the run was submitted") {
		t.Errorf("%s: %q", end.Status, out)
	}
}

func storeAll(h *harness) store.RunFilter {
	return store.RunFilter{ProjectID: h.srv.projectID, All: true}
}
