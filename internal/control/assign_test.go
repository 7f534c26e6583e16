package control

import (
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// A run's stop_duration is its grace period; off kills at once; without it
// the server's --stop-grace applies.
func TestStopDurationIsGrace(t *testing.T) {
	c := New(Config{StopGrace: time.Second})
	for text, want := range map[string]int64{"": 1, "stop_duration: 45s\n": 45, "stop_duration: off\n": 0} {
		tk, err := spec.Parse("test.yml", []byte("type: task\ncommands: [\"true\"]\n"+text))
		if err != nil {
			t.Fatal(err)
		}
		rs := c.newRunState(store.Run{ID: 1}, tk, "u", "p")
		js := &jobState{run: rs}
		rs.jobs = []*jobState{js}
		if got := c.assignment(js, []string{"n"}, []string{"127.0.0.1"}).Grace; got != want {
			t.Errorf("%q: grace %d, want %d", text, got, want)
		}
	}
}

func TestVisibleDevices(t *testing.T) {
	devs := []api.GPU{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}, {Index: 2, UUID: "MIG-c"}}
	for _, tc := range []struct {
		alloc []int
		want  string
	}{{nil, ""}, {[]int{1, 0}, "1,0"}, {[]int{2}, "MIG-c"}, {[]int{0, 2}, "GPU-a,MIG-c"}} {
		if got := visibleDevices(tc.alloc, devs); got != tc.want {
			t.Errorf("visibleDevices(%v) = %q, want %q", tc.alloc, got, tc.want)
		}
	}
}

// A time limit stored before limits were bounded (`max_duration:
// 999999999999w` was accepted once) counts as the bound, 100 years: it
// must not wrap around into a limit that has passed.
func TestStoredLimitBounded(t *testing.T) {
	c := New(Config{})
	huge := spec.Duration(999999999999 * 7 * 86400)
	tk := &spec.Task{Type: "task", Commands: []string{"true"}, MaxDuration: &huge}
	rs := c.newRunState(store.Run{ID: 1}, tk, "u", "p")
	if want := 36500 * 24 * time.Hour; rs.limit != want {
		t.Errorf("the run's limit is %v, want %v", rs.limit, want)
	}
	js := &jobState{run: rs}
	rs.jobs = []*jobState{js}
	if got := c.assignment(js, []string{"n"}, []string{"127.0.0.1"}).MaxDuration; got != int64(spec.MaxDurationValue) {
		t.Errorf("the job's limit is %ds, want %ds", got, spec.MaxDurationValue)
	}
}

// A job runs as its run's user: the login of that name, and root for the
// admin (root through a socket is the admin).
func TestAssignmentUser(t *testing.T) {
	c := New(Config{})
	tk := &spec.Task{Type: "task", Commands: []string{"true"}}
	for user, want := range map[string]string{"alice": "alice", "admin": "root"} {
		rs := c.newRunState(store.Run{ID: 1}, tk, user, "p")
		js := &jobState{run: rs}
		rs.jobs = []*jobState{js}
		if got := c.assignment(js, []string{"n"}, []string{"127.0.0.1"}).User; got != want {
			t.Errorf("user %s: the assignment's user is %q, want %q", user, got, want)
		}
	}
}
