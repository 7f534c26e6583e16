package sched

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func (p Pending) owner(project, user string) Pending { p.Project, p.User = project, user; return p }

// A user's limits within a project (their association with the account)
// bind their runs in that project only; a project's user_limits bind each
// of its users who has none of their own; a GrpTRES on GPUs holds a 2-GPU
// run with AssocGrpGRES.
func TestProjectUserLimits(t *testing.T) {
	node := aNode("n1", 16, 64*gb, a100(0), a100(1), a100(2), a100(3))
	tests := map[string]struct {
		limits      map[LimitKey]Limits
		pending     []Pending
		wantStarted []int64
		wantReasons map[int64]string
	}{
		"a user's MaxJobs in one project": {
			limits:      map[LimitKey]Limits{ProjectUserKey("ml", "ann"): {Jobs: 1}},
			pending:     []Pending{aRun(1, 1).owner("ml", "ann"), aRun(2, 1).owner("ml", "ann"), aRun(3, 1).owner("ml", "bob"), aRun(4, 1).owner("bio", "ann")},
			wantStarted: []int64{1, 3, 4},
			wantReasons: map[int64]string{2: ReasonAssocMaxJobs},
		},
		"the project's user_limits bind each user without their own": {
			limits: map[LimitKey]Limits{{ScopeProjectUser, "ml"}: {Jobs: 1}, ProjectUserKey("ml", "bob"): {Jobs: 2}},
			pending: []Pending{aRun(1, 1).owner("ml", "ann"), aRun(2, 1).owner("ml", "ann"), aRun(3, 1).owner("ml", "bob"),
				aRun(4, 1).owner("ml", "bob"), aRun(5, 1).owner("ml", "bob")},
			wantStarted: []int64{1, 3, 4},
			wantReasons: map[int64]string{2: ReasonAssocMaxJobs, 5: ReasonAssocMaxJobs},
		},
		"GrpTRES gres/gpu=1 holds a 2-GPU run": {
			limits:      map[LimitKey]Limits{{ScopeProject, "ml"}: {TRES: TRES{GPUs: 1}}},
			pending:     []Pending{aRun(1, 1).owner("ml", "ann").gpu(GPURequest{Count: 2}), aRun(2, 1).owner("ml", "ann").gpu(GPURequest{Count: 1})},
			wantStarted: []int64{2},
			wantReasons: map[int64]string{1: ReasonAssocGrpGRES},
		},
		"a user's CPUs in a project": {
			limits:      map[LimitKey]Limits{ProjectUserKey("ml", "ann"): {TRES: TRES{CPUs: 4}}},
			pending:     []Pending{aRun(1, 3).owner("ml", "ann"), aRun(2, 3).owner("ml", "ann"), aRun(3, 3).owner("ml", "bob")},
			wantStarted: []int64{1, 3},
			wantReasons: map[int64]string{2: ReasonAssocGrpCPU},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := Schedule(Snapshot{Nodes: []Node{node}, Pending: tc.pending, Limits: tc.limits}, t0)
			var started []int64
			for _, s := range p.Starts {
				started = append(started, s.RunID)
			}
			if diff := cmp.Diff(tc.wantStarted, started); diff != "" {
				t.Errorf("started (-want +got):\n%s", diff)
			}
			for id, want := range tc.wantReasons {
				if got := p.Reasons[id]; got != want {
					t.Errorf("run %d waits for %q, want %q", id, got, want)
				}
			}
		})
	}
}

// LimitOf finds a user's own association first, then their project's
// user_limits, and never another project's.
func TestLimitOf(t *testing.T) {
	m := map[LimitKey]int{{ScopeProjectUser, "ml"}: 5, ProjectUserKey("ml", "ann"): 2, {ScopeQOSUser, "high"}: 7}
	for k, want := range map[LimitKey]int{ProjectUserKey("ml", "ann"): 2, ProjectUserKey("ml", "bob"): 5,
		{ScopeQOSUser, "high\x00ann"}: 7} {
		if got, ok := LimitOf(m, k); !ok || got != want {
			t.Errorf("LimitOf(%q) = %d %v, want %d", k.Name, got, ok, want)
		}
	}
	if _, ok := LimitOf(m, ProjectUserKey("bio", "ann")); ok {
		t.Error("ann in bio has ml's limit")
	}
}

// sshare's tree: the root, each project then its users; a user's
// FairShare is the factor the scheduler gives their runs; norm shares add
// up to 1 at each level; an idle user of a busy project has an effective
// usage between theirs and the project's.
func TestShareTree(t *testing.T) {
	usage := Usage{{"ml", "ann"}: 300, {"ml", "bob"}: 100, {"bio", "cat"}: 100}
	shares := &Shares{Projects: map[string]int{"ml": 3, "bio": 1}, Users: map[string]map[string]int{"ml": {"ann": 1, "bob": 1, "dan": 2}}}
	rows := ShareTree(usage, shares, []Account{{"bio", "eve"}})
	var names []string
	for _, r := range rows {
		names = append(names, r.Project+"/"+r.User)
	}
	if diff := cmp.Diff([]string{"/", "bio/", "bio/cat", "bio/eve", "ml/", "ml/ann", "ml/bob", "ml/dan"}, names); diff != "" {
		t.Fatalf("rows (-want +got):\n%s", diff)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	if r := rows[0]; r.RawUsage != 500 || r.NormShares != 1 {
		t.Errorf("root = %+v", r)
	}
	if r := rows[4]; r.RawShares != 3 || !near(r.NormShares, 0.75) || r.RawUsage != 400 || !near(r.NormUsage, 0.8) {
		t.Errorf("ml = %+v", r)
	}
	// dan used nothing: his effective usage is pulled towards ml's.
	dan := rows[7]
	if dan.RawShares != 2 || !near(dan.NormShares, 0.375) || !(dan.EffectiveUsage > 0 && dan.EffectiveUsage < 0.8) {
		t.Errorf("dan = %+v", dan)
	}
	snap := &Snapshot{Usage: usage, Shares: shares, Pending: []Pending{{Project: "bio", User: "eve"}}}
	f := newFairshare(snap)
	for _, r := range rows[1:] {
		if r.User == "" {
			continue
		}
		if want := f.factor(Account{r.Project, r.User}); r.FairShare != want {
			t.Errorf("%s/%s FairShare = %v, the scheduler's factor %v", r.Project, r.User, r.FairShare, want)
		}
	}
	if !(rows[5].FairShare < rows[6].FairShare && rows[6].FairShare < rows[7].FairShare) {
		t.Errorf("ann (most usage) %v, bob %v, dan (none) %v: want increasing", rows[5].FairShare, rows[6].FairShare, rows[7].FairShare)
	}
}
