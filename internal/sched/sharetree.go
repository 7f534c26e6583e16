package sched

import (
	"math"
	"slices"
)

// ShareRow is one line of the fairshare tree as Slurm's sshare prints it
// (classic fairshare): the root (Project ""), a project, or a user within
// one. Usages are normalised by the tree's total.
type ShareRow struct {
	Project, User  string
	RawShares      int
	NormShares     float64 // of the whole cluster
	RawUsage       float64 // decayed billing-seconds
	NormUsage      float64
	EffectiveUsage float64
	FairShare      float64
}

// ShareTree is the tree the scheduler weighs at a pass over usage, shares
// and the accounts of the waiting runs: the root, then each project in name
// order followed by its users in name order. A user's FairShare is the
// factor a pass gives their runs; a project's is 2^(-usage/shares) of the
// project itself.
func ShareTree(usage Usage, shares *Shares, waiting []Account) []ShareRow {
	snap := &Snapshot{Usage: usage, Shares: shares}
	for _, a := range waiting {
		snap.Pending = append(snap.Pending, Pending{Project: a.Project, User: a.User})
	}
	f := newFairshare(snap)
	users := map[string][]string{}
	add := func(a Account) {
		if !slices.Contains(users[a.Project], a.User) {
			users[a.Project] = append(users[a.Project], a.User)
		}
	}
	for a := range usage {
		add(a)
	}
	for _, a := range waiting {
		add(a)
	}
	for p, us := range f.shares.Users {
		for u := range us {
			add(Account{p, u})
		}
	}
	names := make([]string, 0, len(f.projects))
	for name := range f.projects {
		names = append(names, name)
	}
	slices.Sort(names)
	rows := []ShareRow{{RawUsage: f.total, NormShares: 1, NormUsage: 1, EffectiveUsage: 1}}
	if f.total <= 0 {
		rows[0].NormUsage, rows[0].EffectiveUsage = 0, 0
	}
	norm := func(v float64) float64 {
		if f.total <= 0 {
			return 0
		}
		return v / f.total
	}
	for _, name := range names {
		p := f.projects[name]
		row := ShareRow{Project: name, RawShares: int(p.share), RawUsage: p.usage.value()}
		if f.all > 0 {
			row.NormShares = float64(p.share) / f.all
		}
		row.NormUsage = norm(row.RawUsage)
		row.EffectiveUsage = row.NormUsage // a child of the root: its own
		row.FairShare = factorOf(row.EffectiveUsage, row.NormShares, f.total)
		rows = append(rows, row)
		us := users[name]
		slices.Sort(us)
		for _, u := range us {
			a := Account{name, u}
			s := shareOf(f.shares.Users[name], u)
			ur := ShareRow{Project: name, User: u, RawShares: s, RawUsage: usage[a]}
			ur.NormUsage = norm(ur.RawUsage)
			if p.siblings > 0 {
				frac := float64(s) / float64(p.siblings)
				ur.NormShares = row.NormShares * frac
				ur.EffectiveUsage = ur.NormUsage + (row.NormUsage-ur.NormUsage)*frac
			}
			ur.FairShare = f.computeWith(a, usage[a])
			rows = append(rows, ur)
		}
	}
	return rows
}

// factorOf is Slurm's classic fairshare factor, 2^(-usage/shares): 1 with
// no usage at all, 0 without shares.
func factorOf(effUsage, normShares, total float64) float64 {
	if total <= 0 {
		return 1
	}
	if normShares <= 0 {
		return 0
	}
	return math.Pow(2, -effUsage/normShares)
}
