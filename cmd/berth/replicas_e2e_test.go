//go:build linux

package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store/pgtest"
)

// replicaProc is one `berth server --replica` of a test.
type replicaProc struct {
	name, url string
	p         *proc
}

var followingRE = regexp.MustCompile(`msg="replica following".* url=(\S+)`)

// startReplicas starts n replicas on db, the first leading, and returns
// them once each serves (the others as followers).
func startReplicas(c *cluster, db string, n int) []*replicaProc {
	c.t.Helper()
	var rs []*replicaProc
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("replica-%c", 'a'+i)
		r := &replicaProc{name: name}
		logPath := filepath.Join(c.home, name+".log")
		r.p = c.start(name, logPath, c.env(), "server", "--replica", "--no-local-agent", "--listen", "127.0.0.1:0", "--db", db)
		ready := "replica following"
		if i == 0 {
			ready = "Berth server on"
		}
		waitFor(c.t, 30*time.Second, name+": "+ready, func() bool {
			b, _ := os.ReadFile(logPath)
			if m := followingRE.FindSubmatch(b); m != nil {
				r.url = string(m[1])
			}
			return r.url != "" && strings.Contains(string(b), ready)
		})
		rs = append(rs, r)
	}
	return rs
}

func waitFor(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, timeout)
		}
	}
}

// TestReplicasFailover runs three replicas on one PostgreSQL database
// with an agent given all three URLs. The leader is killed with SIGKILL
// while a job runs: a follower takes over, the agent reconnects, the job
// keeps running and ends done, started once; a new submission runs. Then
// the new leader's lease session is terminated in PostgreSQL (a
// partition): it steps down (its process ends), the last replica leads,
// and again a submission runs and nothing started twice.
func TestReplicasFailover(t *testing.T) {
	if !pgtest.Available() {
		t.Skip(pgtest.ErrMissing)
	}
	t.Parallel()
	c := newCluster(t)
	db := pgtest.Database(t)
	rs := startReplicas(c, db, 3)
	var urls []string
	for _, r := range rs {
		urls = append(urls, r.url)
	}
	var cfg struct {
		Token string `yaml:"token"`
	}
	b, err := os.ReadFile(filepath.Join(c.home, "config.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	list := strings.Join(urls, ",")
	// The client configuration names every replica; a replica that takes
	// the lead keeps the list (it names it).
	c.writeConfig("config.yml", fmt.Sprintf("url: %s\ntoken: %s\n", list, cfg.Token))
	(&server{c: c, url: list, token: cfg.Token}).startAgent("n1", filepath.Join(c.home, "data-n1"), "--cpus", "2", "--memory", "1GB")
	cl := client.New(list, cfg.Token)

	// Each run appends a line to its marker file when it starts: one line
	// at the end is "started once".
	submit := func(name, cmds string) {
		t.Helper()
		text := fmt.Sprintf("type: task\nname: %s\ncommands:\n  - echo started >> %s\n%s", name, filepath.Join(c.home, name+".starts"), cmds)
		task, err := spec.Parse(name+".yml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		// Retried with one key through the failover: acknowledged once.
		key := "replicas-" + name
		waitFor(t, 60*time.Second, name+" acknowledged", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cl.SubmitKey(ctx, api.SubmitRequest{Spec: task}, key)
			if err != nil {
				t.Logf("submit %s: %v (retrying)", name, err)
				time.Sleep(200 * time.Millisecond)
			}
			return err == nil
		})
	}
	waitStatus := func(name string, timeout time.Duration, ok func(*api.Run) bool) *api.Run {
		t.Helper()
		var last *api.Run
		waitFor(t, timeout, name+" in the awaited state (last: "+fmt.Sprint(last)+")", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := cl.Run(ctx, name)
			if err == nil {
				last = r
			}
			return err == nil && ok(r)
		})
		return last
	}
	starts := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(c.home, name+".starts"))
		return strings.Count(string(b), "started")
	}
	done := func(name string) {
		t.Helper()
		r := waitStatus(name, 90*time.Second, func(r *api.Run) bool { return r.Status.Finished() })
		if r.Status != api.StatusDone {
			t.Errorf("run %s: %s (%s), want done", name, r.Status, r.Reason)
		}
		if n := starts(name); n != 1 {
			t.Errorf("run %s started %d times, want once", name, n)
		}
	}

	submit("long", "  - sleep 8\n  - echo finished\n")
	waitFor(t, 60*time.Second, "long started", func() bool { return starts("long") > 0 })

	// kill -9 of the leader.
	killed := time.Now()
	rs[0].p.kill()
	submit("after-kill", "  - echo hello\n")
	acked := time.Since(killed)
	waitStatus("after-kill", 60*time.Second, func(r *api.Run) bool { return r.Status != api.StatusSubmitted && r.Status != api.StatusScheduled })
	t.Logf("failover after kill -9 (measured, not asserted): a submission acknowledged %v and placed %v after the kill", acked.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	done("long")
	done("after-kill")
	if b, _ := os.ReadFile(filepath.Join(c.home, "config.yml")); !strings.Contains(string(b), "url: "+list+"\n") {
		t.Errorf("config.yml after the takeover:\n%s\nwant url: %s", b, list)
	}
	// The commands, through the configuration's list, reach the new leader.
	if r := c.berth("", "ps", "-a"); r.code != 0 || !strings.Contains(r.stdout, "after-kill") {
		t.Errorf("berth ps -a after the takeover: %s", r)
	}

	// A partition: PostgreSQL ends the leader's lease session.
	pg, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	ctx := context.Background()
	var epoch int64
	var leaderURL string
	if err := pg.QueryRowContext(ctx, `SELECT epoch, leader_url FROM leadership`).Scan(&epoch, &leaderURL); err != nil {
		t.Fatal(err)
	}
	var leader *replicaProc
	for _, r := range rs[1:] {
		if r.url == leaderURL {
			leader = r
		}
	}
	if leader == nil || epoch != 2 {
		t.Fatalf("after the kill the leader is %q at epoch %d; want one of %v at epoch 2", leaderURL, epoch, urls[1:])
	}
	var n int
	if err := pg.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND ((classid::bigint << 32) | objid::bigint) = $1`, int64(0x6265727468_737276)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminating the leader's lease session: %d sessions, %v", n, err)
	}
	parted := time.Now()
	waitFor(t, 30*time.Second, leader.name+" stepped down", leader.p.exited)
	if b, _ := os.ReadFile(filepath.Join(c.home, leader.name+".log")); !strings.Contains(string(b), "lost the leader lease") {
		t.Errorf("%s ended without saying it lost the lease:\n%s", leader.name, b)
	}
	submit("after-partition", "  - echo hello\n")
	t.Logf("failover after a partition (measured, not asserted): a submission acknowledged %v after the lease session ended", time.Since(parted).Round(time.Millisecond))
	done("after-partition")
	if err := pg.QueryRowContext(ctx, `SELECT epoch, leader_url FROM leadership`).Scan(&epoch, &leaderURL); err != nil {
		t.Fatal(err)
	}
	if epoch != 3 || leaderURL == leader.url || leaderURL == rs[0].url {
		t.Errorf("after the partition the leader is %q at epoch %d; want the third replica at epoch 3", leaderURL, epoch)
	}
	for _, name := range []string{"long", "after-kill"} {
		if n := starts(name); n != 1 {
			t.Errorf("run %s started %d times by the end, want once", name, n)
		}
	}
}
