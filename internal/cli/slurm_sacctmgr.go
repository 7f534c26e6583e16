package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/sched"
	"github.com/berth-hq/berth/internal/slurmconv"
	"github.com/berth-hq/berth/internal/spec"
)

// sacctmgr shows and changes what Berth's policy file says of QOS,
// accounts (projects), users and their limits. The file is the server's:
// show reads it from the server (GET /api/v1/policy/file), or where the
// server runs ($BERTH_HOME/policy.yml, or BERTH_POLICY_FILE) when no server
// is configured; add, modify and delete edit it through the server, which
// puts the change in force at once (slurm_sacctmgr_edit.go).

var sacctmgrOptions = []slurmOpt{
	{"help", 'h', noArg}, {"immediate", 'i', noArg}, {"noheader", 'n', noArg}, {"parsable", 'p', noArg},
	{"parsable2", 'P', noArg}, {"quiet", 'Q', noArg}, {"readonly", 'r', noArg}, {"associations", 's', noArg},
	{"verbose", 'v', noArg}, {"version", 'V', noArg}, {"json", 0, noArg},
}

func runSacctmgr(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sacctmgr", args, sacctmgrOptions, true)
	if err != nil {
		return err
	}
	var noHeader, parsable, parsable2, immediate, withAssoc bool
	for _, g := range got {
		switch g.name {
		case "help":
			fmt.Fprintln(e.stdout, "sacctmgr [<OPTION>] [<COMMAND>]\n  Berth's sacctmgr shows and changes the server's policy file: list|show qos, account, user, association, cluster;\n  add|modify|delete qos, account, user.\n  Options: -i (commit without asking), -n (no header), -p, -P (parsable).")
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "noheader":
			noHeader = true
		case "immediate":
			immediate = true
		case "parsable":
			parsable = true
		case "parsable2":
			parsable2 = true
		case "associations":
			withAssoc = true
		}
	}
	if len(rest) == 0 {
		return slurmFail(1, "sacctmgr: error: Berth's sacctmgr has no interactive mode: give a command (sacctmgr show qos)")
	}
	verb := strings.ToLower(rest[0])
	switch verb {
	case "show", "list":
	case "add", "create", "modify", "update", "delete", "remove":
		if len(rest) < 2 {
			return slurmFail(1, "sacctmgr: error: "+verb+" needs an entity: qos, account, user")
		}
		return runSacctmgrChange(e, verb, strings.ToLower(rest[1]), rest[2:], immediate)
	case "archive", "load", "dump":
		return slurmFail(1, fmt.Sprintf("sacctmgr: error: %s: Berth keeps accounts, users, QOS and limits in the server's policy file (%s), not in a database", verb, policyPath(e)))
	default:
		return slurmFail(1, "sacctmgr: error: Invalid command: "+rest[0])
	}
	if len(rest) < 2 {
		return slurmFail(1, "sacctmgr: error: list/show needs an entity: qos, account, user, association, cluster")
	}
	entity := strings.ToLower(rest[1])
	p, err := sacctmgrPolicy(e)
	if err != nil {
		return slurmFail(1, "sacctmgr: error: "+err.Error())
	}
	cond := parseListArgs(entity, rest[2:])
	members := sacctmgrMembers(e)
	var header []string
	var rows [][]string
	switch {
	case strings.HasPrefix(entity, "qos"):
		header = []string{"Name", "Priority", "Preempt", "PreemptMode", "GrpTRES", "GrpJobs", "MaxWall", "MaxTRESPU", "MaxJobsPU", "MaxSubmitPU"}
		names := make([]string, 0, len(p.QOS))
		for n := range p.QOS {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			rows = append(rows, []string{"normal", "0", "", "cluster", "", "", "", "", "", ""})
		}
		for _, n := range names {
			q := p.QOS[n]
			grp := p.Limits[sched.LimitKey{Scope: sched.ScopeQOS, Name: n}]
			per := p.Limits[sched.LimitKey{Scope: sched.ScopeQOSUser, Name: n}]
			mode := "cluster"
			if len(q.Preempt) > 0 {
				mode = strings.ToUpper(q.Mode.String())
			}
			rows = append(rows, []string{n, strconv.Itoa(q.Priority), strings.Join(q.Preempt, ","), mode, tresLimit(grp.TRES), countLimit(grp.Jobs),
				wallLimit(grp), tresLimit(per.TRES), countLimit(per.Jobs), countLimit(p.Submit[sched.LimitKey{Scope: sched.ScopeQOSUser, Name: n}])})
		}
	case strings.HasPrefix(entity, "account"):
		header = []string{"Account", "Descr", "Org"}
		for _, a := range members.accounts(p) {
			if cond.keepAccount(a) {
				rows = append(rows, []string{a, a, a})
			}
		}
	case strings.HasPrefix(entity, "user") && !withAssoc:
		header = []string{"User", "Def Acct", "Admin"}
		pairs := members.users(p)
		seen := map[string]bool{}
		for _, u := range pairs {
			if !seen[u[1]] && cond.keepUser(u[1]) {
				seen[u[1]] = true
				rows = append(rows, []string{u[1], defAcct(pairs, u[1]), adminLevel(u[1])})
			}
		}
	case strings.HasPrefix(entity, "user"):
		// -s: the users with their associations, one row each.
		header = []string{"User", "Def Acct", "Admin", "Cluster", "Account", "Partition", "Share", "MaxJobs", "MaxNodes", "MaxCPUs", "MaxSubmit", "MaxWall", "MaxCPUMins", "QOS", "Def QOS"}
		def := orStr(p.DefaultQOS, "normal")
		pairs := members.users(p)
		for _, u := range pairs {
			if !cond.keepUser(u[1]) || !cond.keepAccount(u[0]) {
				continue
			}
			l, sub := assocLimits(p, u[0], u[1])
			rows = append(rows, []string{u[1], defAcct(pairs, u[1]), adminLevel(u[1]), slurmconv.ClusterName, u[0], "", userShare(p, u), countLimit(l.Jobs), "", "",
				countLimit(sub), wallLimit(l), "", def, ""})
		}
	case strings.HasPrefix(entity, "assoc"):
		header = []string{"Cluster", "Account", "User", "Partition", "Share", "GrpJobs", "GrpTRES", "MaxJobs", "MaxTRES", "MaxSubmit", "MaxWall", "QOS", "Def QOS"}
		def := orStr(p.DefaultQOS, "normal")
		for _, a := range members.accounts(p) {
			if !cond.keepAccount(a) || len(cond.users) > 0 {
				continue
			}
			l := p.Limits[sched.LimitKey{Scope: sched.ScopeProject, Name: a}]
			share := "1"
			if p.Shares != nil && p.Shares.Projects[a] > 0 {
				share = strconv.Itoa(p.Shares.Projects[a])
			}
			rows = append(rows, []string{slurmconv.ClusterName, a, "", "", share, countLimit(l.Jobs), tresLimit(l.TRES), "", "", countLimit(p.Submit[sched.LimitKey{Scope: sched.ScopeProject, Name: a}]), wallLimit(l), def, ""})
		}
		for _, u := range members.users(p) {
			if !cond.keepUser(u[1]) || !cond.keepAccount(u[0]) {
				continue
			}
			l, sub := assocLimits(p, u[0], u[1])
			rows = append(rows, []string{slurmconv.ClusterName, u[0], u[1], "", userShare(p, u), "", "", countLimit(l.Jobs), tresLimit(l.TRES), countLimit(sub), wallLimit(l), def, ""})
		}
	case strings.HasPrefix(entity, "cluster"):
		header = []string{"Cluster", "ControlHost", "ControlPort", "RPC", "Share", "QOS", "Def QOS"}
		rows = append(rows, []string{slurmconv.ClusterName, "", "0", "9984", "1", "normal", ""})
	default:
		return slurmFail(1, "sacctmgr: error: Berth's sacctmgr shows qos, account, user, association and cluster; not "+rest[1])
	}
	header, widths, rows, err := cond.columns(header, rows)
	if err != nil {
		return err
	}
	printSacctmgr(e.stdout, header, widths, rows, noHeader, parsable, parsable2)
	return nil
}

// sacctmgrPolicy is the policy file's as the server has it, or as it is
// on this machine when no server is configured.
func sacctmgrPolicy(e *slurmEnv) (*policy.Policy, error) {
	if c, err := e.newClient(); err == nil {
		f, err := c.PolicyFile(e.ctx)
		if err == nil {
			return policy.Parse(orStr(f.Path, "policy.yml"), []byte(f.Text))
		}
		if !errors.Is(err, client.ErrNotFound) { // 404: a server without a policy file
			return nil, err
		}
	}
	p, err := policy.Load(policyPath(e))
	if errors.Is(err, os.ErrNotExist) {
		return policy.Empty(), nil
	}
	return p, err
}

func policyPath(e *slurmEnv) string {
	if p := e.getenv("BERTH_POLICY_FILE"); p != "" {
		return p
	}
	return filepath.Join(Home(), "policy.yml")
}

func projects(p *policy.Policy) []string {
	set := map[string]bool{slurmconv.DefaultAccount: true}
	for a := range p.Projects {
		set[a] = true
	}
	if p.Shares != nil {
		for a := range p.Shares.Projects {
			set[a] = true
		}
	}
	for k := range p.Limits {
		if k.Scope == sched.ScopeProject {
			set[k.Name] = true
		}
	}
	var out []string
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// assocLimits are the limits of user's association with account: its
// own (projects.A.users.U.limits, else the account's user_limits), else
// the user's over all accounts.
func assocLimits(p *policy.Policy, account, user string) (sched.Limits, int) {
	k := sched.ProjectUserKey(account, user)
	l, ok := sched.LimitOf(p.Limits, k)
	sub, subOK := sched.LimitOf(p.Submit, k)
	if !ok && !subOK {
		return p.Limits[sched.LimitKey{Scope: sched.ScopeUser, Name: user}], p.Submit[sched.LimitKey{Scope: sched.ScopeUser, Name: user}]
	}
	return l, sub
}

// users are [project, user] pairs of the fairshare tree and user limits.
func users(p *policy.Policy) [][2]string {
	set := map[[2]string]bool{}
	for a, us := range p.Projects {
		for _, u := range us {
			set[[2]string{a, u}] = true
		}
	}
	if p.Shares != nil {
		for a, us := range p.Shares.Users {
			for u := range us {
				set[[2]string{a, u}] = true
			}
		}
	}
	for k := range p.Limits {
		if k.Scope == sched.ScopeUser {
			found := false
			for pair := range set {
				if pair[1] == k.Name {
					found = true
				}
			}
			if !found {
				set[[2]string{slurmconv.DefaultAccount, k.Name}] = true
			}
		}
	}
	var out [][2]string
	for pair := range set {
		out = append(out, pair)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][1] != out[j][1] {
			return out[i][1] < out[j][1]
		}
		return out[i][0] < out[j][0]
	})
	return out
}

func countLimit(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func wallLimit(l sched.Limits) string {
	if l.Wall <= 0 {
		return ""
	}
	s := int64(l.Wall.Seconds())
	d, h, m, sec := s/86400, s%86400/3600, s%3600/60, s%60
	if d > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, sec)
}

func tresLimit(t sched.TRES) string {
	var parts []string
	if t.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("cpu=%d", t.CPUs))
	}
	if t.Memory > 0 {
		parts = append(parts, fmt.Sprintf("mem=%dM", int64(t.Memory)/int64(spec.MB)))
	}
	if t.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("gres/gpu=%d", t.GPUs))
	}
	types := make([]string, 0, len(t.GPUTypes))
	for k := range t.GPUTypes {
		types = append(types, k)
	}
	sort.Strings(types)
	for _, k := range types {
		parts = append(parts, fmt.Sprintf("gres/gpu:%s=%d", k, t.GPUTypes[k]))
	}
	return strings.Join(parts, ",")
}

// printSacctmgr writes rows as sacctmgr does: right-aligned columns of 10
// characters cut with "+", or "|"-separated with -p/-P.
func printSacctmgr(w io.Writer, header []string, widths []int, rows [][]string, noHeader, parsable, parsable2 bool) {
	width := func(i int) int {
		if i < len(widths) && widths[i] != 0 {
			return widths[i]
		}
		return 10
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			switch {
			case parsable2:
				if i > 0 {
					b.WriteByte('|')
				}
				b.WriteString(c)
			case parsable:
				b.WriteString(c + "|")
			default:
				// As Slurm's print_fields_str: cut with "+", a
				// positive width right-aligned, a negative one left.
				n := width(i)
				abs := max(n, -n)
				if len(c) > abs {
					c = c[:abs-1] + "+"
				}
				if n > 0 {
					fmt.Fprintf(&b, "%*s ", abs, c)
				} else {
					fmt.Fprintf(&b, "%-*s ", abs, c)
				}
			}
		}
		fmt.Fprintln(w, b.String())
	}
	if !noHeader {
		line(header)
		if !parsable && !parsable2 {
			dashes := make([]string, len(header))
			for i := range dashes {
				n := width(i)
				dashes[i] = strings.Repeat("-", max(n, -n))
			}
			line(dashes)
		}
	}
	for _, r := range rows {
		line(r)
	}
}
