package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

// sacctmgr add, modify and delete edit the server's policy file: the
// client reads its text and version (GET /policy/file), edits the YAML in
// place (policy.Doc: comments and order stay), checks the result as the
// server will, and writes it back with the version it read (PUT): a file
// changed meanwhile is read and edited again, once. The server puts the
// new rules in force at once.

// acctKV is one KEY=VALUE (or KEY+=VALUE, KEY-=VALUE) of a command line.
type acctKV struct{ key, op, val, raw string }

// acctArgs are a change's names, conditions (where) and settings (set).
type acctArgs struct {
	names      []string
	where, set []acctKV
}

func parseAcctArgs(verb string, args []string) acctArgs {
	var a acctArgs
	inSet := verb == "add"
	for _, arg := range args {
		switch strings.ToLower(arg) {
		case "where":
			inSet = false
			continue
		case "set":
			inSet = true
			continue
		}
		i := strings.IndexByte(arg, '=')
		if i <= 0 {
			a.names = append(a.names, splitList(arg)...)
			continue
		}
		kv := acctKV{key: strings.ToLower(arg[:i]), op: "=", val: arg[i+1:], raw: arg}
		if c := kv.key[len(kv.key)-1]; c == '+' || c == '-' {
			kv.key, kv.op = kv.key[:len(kv.key)-1], string(c)+"="
		}
		if kv.key == "name" || kv.key == "names" || kv.key == "user" && verb != "add" && !inSet || kv.key == "users" {
			a.names = append(a.names, splitList(kv.val)...)
			continue
		}
		if inSet {
			a.set = append(a.set, kv)
		} else {
			a.where = append(a.where, kv)
		}
	}
	return a
}

// acctEdit is one change of the file: a value at a path, or its removal.
type acctEdit struct {
	path  []string
	value string
	del   bool
}

// acctChange is what one command does to the file, and what it prints.
type acctChange struct {
	edits []acctEdit
	out   strings.Builder
}

func (c *acctChange) set(value string, path ...string) {
	c.edits = append(c.edits, acctEdit{path: path, value: value})
}

func (c *acctChange) del(path ...string) { c.edits = append(c.edits, acctEdit{path: path, del: true}) }

// acctFail is a refusal with Slurm's text: nothing is changed, exit 1.
func acctFail(lines ...string) error { return slurmFail(1, lines...) }

// The settings Berth's policy file has a place for, by entity.
var (
	qosFields     = []string{"Priority", "Preempt", "PreemptMode", "GrpTRES", "GrpJobs", "GrpSubmitJobs", "MaxTRESPerUser", "MaxJobsPerUser", "MaxSubmitJobsPerUser", "MaxWall"}
	accountFields = []string{"Fairshare", "GrpTRES", "GrpJobs", "GrpSubmitJobs", "MaxJobs", "MaxSubmitJobs", "MaxWall", "Parent=root"}
	userFields    = []string{"Account", "Fairshare", "GrpTRES", "MaxJobs", "MaxSubmitJobs", "MaxWall"}
)

// field names a setting's key in the canonical spelling, "" when Berth has
// no such setting for the entity.
func field(entity, key string) string {
	alias := map[string]string{"fairshare": "Fairshare", "shares": "Fairshare", "grptres": "GrpTRES", "grpjobs": "GrpJobs",
		"grpsubmitjobs": "GrpSubmitJobs", "grpsubmit": "GrpSubmitJobs", "maxwall": "MaxWall", "maxwalldurationperjob": "MaxWall",
		"priority": "Priority", "preempt": "Preempt", "preemptmode": "PreemptMode", "maxtresperuser": "MaxTRESPerUser", "maxtrespu": "MaxTRESPerUser",
		"maxjobsperuser": "MaxJobsPerUser", "maxjobspu": "MaxJobsPerUser", "maxsubmitjobsperuser": "MaxSubmitJobsPerUser", "maxsubmitpu": "MaxSubmitJobsPerUser",
		"maxsubmitjobspu": "MaxSubmitJobsPerUser", "maxjobs": "MaxJobs", "maxsubmitjobs": "MaxSubmitJobs", "maxsubmit": "MaxSubmitJobs",
		"parent": "Parent=root", "account": "Account", "accounts": "Account", "acct": "Account", "defaultaccount": "Account"}
	f := alias[key]
	fields := map[string][]string{"qos": qosFields, "account": accountFields, "user": userFields}[entity]
	if !slices.Contains(fields, f) {
		return ""
	}
	return f
}

func noHome(entity string, kv acctKV) error {
	fields := map[string][]string{"qos": qosFields, "account": accountFields, "user": userFields}[entity]
	return acctFail(" Unknown option: "+kv.raw,
		fmt.Sprintf(" Berth's policy file has no place for %s of a %s; it keeps: %s", kv.raw[:strings.IndexAny(kv.raw, "+-=")], entity, strings.Join(fields, ", ")))
}

// count reads a non-negative count; -1 clears the setting.
func count(kv acctKV) (string, bool, error) {
	n, err := strconv.Atoi(kv.val)
	switch {
	case err == nil && n == -1:
		return "", true, nil
	case err != nil || n < 0:
		return "", false, acctFail(fmt.Sprintf(" Bad value for %s: %q (want a number, or -1 to clear it)", kv.raw[:strings.IndexByte(kv.raw, '=')], kv.val))
	}
	return strconv.Itoa(n), false, nil
}

// limitEdits turns a limit setting into edits of the limits mapping at
// base (…, "limits").
func limitEdits(c *acctChange, name string, kv acctKV, base []string) error {
	at := func(k ...string) []string { return append(slices.Clone(base), k...) }
	switch name {
	case "GrpJobs", "MaxJobs", "MaxJobsPerUser", "GrpSubmitJobs", "MaxSubmitJobs", "MaxSubmitJobsPerUser":
		key := "jobs"
		if strings.Contains(name, "Submit") {
			key = "submit"
		}
		v, clear, err := count(kv)
		if err != nil {
			return err
		}
		if clear {
			c.del(at(key)...)
		} else {
			c.set(v, at(key)...)
		}
	case "MaxWall":
		if kv.val == "-1" {
			c.del(at("wall")...)
			return nil
		}
		d, err := slurm.ParseTimeLimit(kv.val)
		if err != nil || d <= 0 {
			return acctFail(" Bad MaxWall time format: " + kv.val)
		}
		c.set(durationText(d), at("wall")...)
	case "GrpTRES", "MaxTRESPerUser":
		for _, t := range splitList(kv.val) {
			k, v, ok := strings.Cut(t, "=")
			if !ok {
				return acctFail(" Bad TRES format: " + t + " (write e.g. cpu=64,mem=512G,gres/gpu=8,gres/gpu:a100=4)")
			}
			k = strings.ToLower(k)
			var path []string
			switch {
			case k == "cpu":
				path = at("cpu")
			case k == "mem":
				path = at("memory")
			case k == "gres/gpu":
				path = at("gpu")
			case strings.HasPrefix(k, "gres/gpu:"):
				path = at("gpu_types", strings.TrimPrefix(k, "gres/gpu:"))
			default:
				return acctFail(" Unknown TRES: "+t, " Berth's limits count cpu, mem, gres/gpu and gres/gpu:TYPE")
			}
			if v == "-1" {
				c.del(path...)
				continue
			}
			if k == "mem" {
				b, err := slurm.ParseMemory(v)
				if err != nil {
					return acctFail(" Bad TRES value: " + t)
				}
				c.set(strconv.FormatInt(b>>20, 10)+"MB", path...)
				continue
			}
			v, clear, err := count(acctKV{raw: t, val: v})
			if err != nil {
				return err
			}
			if clear {
				c.del(path...)
			} else {
				c.set(v, path...)
			}
		}
	}
	return nil
}

// durationText writes a time limit in the policy file's units.
func durationText(d time.Duration) string {
	s := int64(d / time.Second)
	switch {
	case s%86400 == 0:
		return fmt.Sprintf("%dd", s/86400)
	case s%3600 == 0:
		return fmt.Sprintf("%dh", s/3600)
	case s%60 == 0:
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%ds", s)
}

// settingLines are the settings as sacctmgr lists them under " Settings".
func settingLines(w *strings.Builder, set []acctKV) {
	for _, kv := range set {
		k := kv.raw[:strings.IndexAny(kv.raw, "+-=")]
		fmt.Fprintf(w, "  %-14s%s %s\n", k, kv.op, kv.val)
	}
}

// qosChange edits qos: entries.
func qosChange(doc *policy.Doc, p *policy.Policy, verb string, a acctArgs) (*acctChange, error) {
	c := &acctChange{}
	for _, kv := range a.where {
		return nil, acctFail(" Unknown condition: "+kv.raw, " Use keyword 'set' to modify value")
	}
	if len(a.names) == 0 {
		return nil, acctFail(" No QOS name given")
	}
	exists := func(q string) bool { return doc.Has("qos", q) }
	switch verb {
	case "add":
		var added []string
		if len(doc.Keys("qos")) == 0 && !slices.Contains(a.names, "normal") {
			c.set("{}", "qos", "normal") // Slurm's QOS normal, implicit until now
		}
		for _, q := range a.names {
			if !exists(q) {
				c.set("{}", "qos", q)
				added = append(added, q)
			}
		}
		if len(added) == 0 {
			return nil, acctFail(" Nothing new added.")
		}
		c.out.WriteString(" Adding QOS(s)\n")
		for _, q := range added {
			fmt.Fprintf(&c.out, "  %s\n", q)
		}
		c.out.WriteString(" Settings\n")
		for _, q := range added {
			fmt.Fprintf(&c.out, "  %-14s= %s\n", "Description", q)
		}
		settingLines(&c.out, a.set)
		a.names = added
	case "modify":
		for _, q := range a.names {
			if !exists(q) {
				return nil, acctFail(" Nothing modified", fmt.Sprintf(" QOS %q does not exist", q))
			}
		}
		if len(a.set) == 0 {
			return nil, acctFail(" You didn't give me anything to set")
		}
		c.out.WriteString(" Modified qos...\n")
		for _, q := range a.names {
			fmt.Fprintf(&c.out, "  %s\n", q)
		}
	case "delete":
		var gone []string
		for _, q := range a.names {
			if exists(q) {
				c.del("qos", q)
				gone = append(gone, q)
			}
		}
		if len(gone) == 0 {
			return nil, acctFail(" Nothing deleted")
		}
		c.out.WriteString(" Deleting QOS(s)...\n")
		for _, q := range gone {
			fmt.Fprintf(&c.out, "  %s\n", q)
		}
		return c, nil
	}
	for _, q := range a.names {
		for _, kv := range a.set {
			f := field("qos", kv.key)
			if f == "" {
				return nil, noHome("qos", kv)
			}
			if kv.op != "=" && f != "Preempt" {
				return nil, acctFail(" Bad format on " + kv.raw + ": only Preempt takes += and -=")
			}
			switch f {
			case "Priority":
				v, clear, err := count(kv)
				if err != nil {
					return nil, err
				}
				if clear {
					c.del("qos", q, "priority")
				} else {
					c.set(v, "qos", q, "priority")
				}
			case "Preempt":
				list := splitList(kv.val)
				var cur []string
				if old, ok := p.QOS[q]; ok {
					cur = old.Preempt
				}
				switch kv.op {
				case "+=":
					list = append(slices.Clone(cur), list...)
				case "-=":
					list = slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return slices.Contains(list, s) })
				}
				slices.Sort(list)
				list = slices.Compact(list)
				if len(list) == 0 {
					c.del("qos", q, "preempt")
					continue
				}
				items := make([]string, len(list))
				for i, s := range list {
					items[i] = policy.Scalar(s)
				}
				c.set("["+strings.Join(items, ", ")+"]", "qos", q, "preempt")
			case "PreemptMode":
				switch m := strings.ToLower(kv.val); m {
				case "requeue", "cancel":
					c.set(m, "qos", q, "preempt_mode")
				case "cluster", "":
					c.del("qos", q, "preempt_mode")
				default:
					return nil, acctFail(" Unknown PreemptMode: "+kv.val, " Berth's preemption modes are requeue and cancel (cluster: the default, requeue)")
				}
			case "GrpTRES", "GrpJobs", "GrpSubmitJobs", "MaxWall":
				if err := limitEdits(c, f, kv, []string{"qos", q, "limits"}); err != nil {
					return nil, err
				}
			default:
				if err := limitEdits(c, f, kv, []string{"qos", q, "user_limits"}); err != nil {
					return nil, err
				}
			}
		}
	}
	if verb == "modify" {
		settingLines(&c.out, a.set)
	}
	return c, nil
}

// accountChange edits projects: entries.
func accountChange(doc *policy.Doc, verb string, a acctArgs, active []api.Run) (*acctChange, error) {
	c := &acctChange{}
	for _, kv := range a.where {
		if kv.key != "cluster" && kv.key != "clusters" {
			return nil, acctFail(" Unknown condition: "+kv.raw, " Use keyword 'set' to modify value")
		}
	}
	if len(a.names) == 0 {
		return nil, acctFail(" No account name given")
	}
	exists := func(n string) bool { return doc.Has("projects", n) || n == slurmconv.DefaultAccount }
	assoc := func(w *strings.Builder, n string) {
		fmt.Fprintf(w, "  C = %-10.10s A = %-10.10s\n", slurmconv.ClusterName, n)
	}
	switch verb {
	case "add":
		var added []string
		for _, n := range a.names {
			if !doc.Has("projects", n) {
				c.set("{}", "projects", n)
				added = append(added, n)
			}
		}
		if len(added) == 0 {
			return nil, acctFail(" Nothing new added.")
		}
		c.out.WriteString(" Adding Account(s)\n")
		for _, n := range added {
			fmt.Fprintf(&c.out, "  %s\n", n)
		}
		fmt.Fprintf(&c.out, " Settings\n  %-16s= %s\n  %-16s= %s\n Associations\n", "Description", "Account Name", "Organization", "Parent/Account Name")
		for _, n := range added {
			fmt.Fprintf(&c.out, "  A = %-10.10s C = %-10.10s\n", n, slurmconv.ClusterName)
		}
		c.out.WriteString(" Settings\n")
		settingLines(&c.out, a.set)
		fmt.Fprintf(&c.out, "  %-14s= %s\n", "Parent", "root")
		a.names = added
	case "modify":
		for _, n := range a.names {
			if !exists(n) {
				return nil, acctFail(" Nothing modified", fmt.Sprintf(" Account %q does not exist", n))
			}
		}
		if len(a.set) == 0 {
			return nil, acctFail(" You didn't give me anything to set")
		}
		c.out.WriteString(" Modified account associations...\n")
		for _, n := range a.names {
			assoc(&c.out, n)
		}
		settingLines(&c.out, a.set)
	case "delete":
		var gone []string
		for _, n := range a.names {
			if !doc.Has("projects", n) {
				continue
			}
			if users := doc.Keys("projects", n, "users"); len(users) > 0 {
				return nil, acctFail(" Error with request: account "+n+" still has users: "+strings.Join(users, ","),
					" Remove them first: sacctmgr delete user NAME account="+n)
			}
			var jobs []string
			for _, r := range active {
				if runAccount(&r) == n {
					jobs = append(jobs, fmt.Sprintf("  JobID = %-10d C = %-10.10s A = %-10.10s U = %-9.9s", r.ID, slurmconv.ClusterName, n, r.User))
				}
			}
			if len(jobs) > 0 {
				return nil, acctFail(append([]string{" Error with request: Job(s) active, cancel job(s) before remove"}, jobs...)...)
			}
			c.del("projects", n)
			gone = append(gone, n)
		}
		if len(gone) == 0 {
			return nil, acctFail(" Nothing deleted")
		}
		c.out.WriteString(" Deleting accounts...\n")
		for _, n := range gone {
			assoc(&c.out, n)
		}
		return c, nil
	}
	for _, n := range a.names {
		for _, kv := range a.set {
			f := field("account", kv.key)
			if f == "" || kv.op != "=" {
				return nil, noHome("account", kv)
			}
			switch f {
			case "Fairshare":
				v, clear, err := count(kv)
				if err != nil {
					return nil, err
				}
				if clear {
					c.del("projects", n, "shares")
				} else {
					c.set(v, "projects", n, "shares")
				}
			case "Parent=root":
				if kv.val != "root" {
					return nil, acctFail(" Unknown option: "+kv.raw, " Berth's accounts are flat: every one's parent is root")
				}
			case "MaxJobs", "MaxSubmitJobs":
				// An account's Max* bind each of its users (Slurm: the
				// users' associations inherit them).
				if err := limitEdits(c, f, kv, []string{"projects", n, "user_limits"}); err != nil {
					return nil, err
				}
			default:
				if err := limitEdits(c, f, kv, []string{"projects", n, "limits"}); err != nil {
					return nil, err
				}
			}
		}
	}
	return c, nil
}

// runAccount is the account a run counts under: its -A, or its project.
func runAccount(r *api.Run) string {
	return orStr(slurmconv.Part(r).Account, r.Project)
}

// userChange edits users' associations (projects.A.users.U) and their
// limits (users.U.limits: Berth's user limits hold over all accounts).
func userChange(doc *policy.Doc, verb string, a acctArgs, active []api.Run, known []string) (*acctChange, error) {
	c := &acctChange{}
	var accounts []string
	rest := a.set
	if verb != "add" {
		rest = nil
		for _, kv := range a.where {
			switch kv.key {
			case "account", "accounts", "acct", "defaultaccount":
				accounts = append(accounts, splitList(kv.val)...)
			case "cluster", "clusters":
			default:
				return nil, acctFail(" Unknown condition: "+kv.raw, " Use keyword 'set' to modify value")
			}
		}
		rest = a.set
	} else {
		rest = nil
		for _, kv := range a.set {
			if field("user", kv.key) == "Account" {
				accounts = append(accounts, splitList(kv.val)...)
			} else {
				rest = append(rest, kv)
			}
		}
	}
	slices.Sort(accounts)
	accounts = slices.Compact(accounts)
	isUser := func(u string) bool {
		if doc.Has("users", u) {
			return true
		}
		for _, p := range doc.Keys("projects") {
			if doc.Has("projects", p, "users", u) {
				return true
			}
		}
		return false
	}
	assocs := func(u string) []string { // the accounts u is in, of those asked for
		var out []string
		for _, p := range doc.Keys("projects") {
			if doc.Has("projects", p, "users", u) && (len(accounts) == 0 || slices.Contains(accounts, p)) {
				out = append(out, p)
			}
		}
		return out
	}
	assocLine := func(w *strings.Builder, acct, u string) {
		fmt.Fprintf(w, "  C = %-10.10s A = %-10.10s U = %-9.9s\n", slurmconv.ClusterName, acct, u)
	}
	users := a.names
	switch verb {
	case "add":
		if len(users) == 0 {
			return nil, acctFail(" Need name of user to add.")
		}
		if len(accounts) == 0 {
			return nil, acctFail(" Need a default account for these users to add.")
		}
		for _, acct := range accounts {
			if !doc.Has("projects", acct) && acct != slurmconv.DefaultAccount && !slices.Contains(known, acct) {
				return nil, acctFail(fmt.Sprintf(" This account '%s' doesn't exist.", acct), "        Contact your admin to add this account.")
			}
		}
		type pair struct{ a, u string }
		var added []pair
		var names []string
		for _, u := range users {
			for _, acct := range accounts {
				if !doc.Has("projects", acct, "users", u) {
					c.set("{}", "projects", acct, "users", u)
					added = append(added, pair{acct, u})
					if !slices.Contains(names, u) {
						names = append(names, u)
					}
				}
			}
		}
		if len(added) == 0 {
			return nil, acctFail(" Nothing new added.")
		}
		c.out.WriteString(" Adding User(s)\n")
		for _, u := range names {
			fmt.Fprintf(&c.out, "  %s\n", u)
		}
		fmt.Fprintf(&c.out, " Settings =\n  Default Account = %s\n Associations =\n", accounts[0])
		for _, p := range added {
			fmt.Fprintf(&c.out, "  U = %-9.9s A = %-10.10s C = %-10.10s\n", p.u, p.a, slurmconv.ClusterName)
		}
		if len(rest) > 0 {
			c.out.WriteString(" Non Default Settings\n")
			settingLines(&c.out, rest)
		}
		users = names
	case "modify":
		if len(users) == 0 {
			// modify user set … where account=A: every user of A.
			for _, acct := range accounts {
				for _, u := range doc.Keys("projects", acct, "users") {
					if !slices.Contains(users, u) {
						users = append(users, u)
					}
				}
			}
		}
		var matched []string
		for _, u := range users {
			if isUser(u) && (len(accounts) == 0 || len(assocs(u)) > 0) {
				matched = append(matched, u)
			}
		}
		if len(matched) == 0 {
			return nil, acctFail(" Nothing modified")
		}
		if len(rest) == 0 {
			return nil, acctFail(" You didn't give me anything to set")
		}
		users = matched
		c.out.WriteString(" Modified user associations...\n")
		for _, u := range users {
			for _, acct := range assocs(u) {
				assocLine(&c.out, acct, u)
			}
		}
		settingLines(&c.out, rest)
	case "delete":
		if len(users) == 0 {
			return nil, acctFail(" No user name given")
		}
		var lines strings.Builder
		deleted := false
		for _, u := range users {
			if !isUser(u) {
				continue
			}
			from := assocs(u)
			var jobs []string
			for _, r := range active {
				if r.User == u && (len(accounts) == 0 || slices.Contains(from, runAccount(&r))) {
					jobs = append(jobs, fmt.Sprintf("  JobID = %-10d C = %-10.10s A = %-10.10s U = %-9.9s", r.ID, slurmconv.ClusterName, runAccount(&r), u))
				}
			}
			if len(jobs) > 0 {
				return nil, acctFail(append([]string{" Error with request: Job(s) active, cancel job(s) before remove"}, jobs...)...)
			}
			for _, acct := range from {
				c.del("projects", acct, "users", u)
				assocLine(&lines, acct, u)
				deleted = true
			}
			if len(accounts) == 0 && doc.Has("users", u) {
				c.del("users", u)
				deleted = true
			}
		}
		if !deleted {
			return nil, acctFail(" Nothing deleted")
		}
		c.out.WriteString(" Deleting user associations...\n")
		c.out.WriteString(lines.String())
		return c, nil
	}
	for _, u := range users {
		for _, kv := range rest {
			f := field("user", kv.key)
			if f == "" || f == "Account" || kv.op != "=" {
				return nil, noHome("user", kv)
			}
			if f != "Fairshare" {
				if verb == "modify" && len(accounts) > 0 {
					// where account=A: the user's association with A.
					for _, acct := range assocs(u) {
						if err := limitEdits(c, f, kv, []string{"projects", acct, "users", u, "limits"}); err != nil {
							return nil, err
						}
					}
					continue
				}
				if err := limitEdits(c, f, kv, []string{"users", u, "limits"}); err != nil {
					return nil, err
				}
				continue
			}
			v, clear, err := count(kv)
			if err != nil {
				return nil, err
			}
			in := assocs(u)
			if verb == "add" {
				in = accounts
			}
			for _, acct := range in {
				if clear {
					c.del("projects", acct, "users", u, "shares")
				} else {
					c.set(v, "projects", acct, "users", u, "shares")
				}
			}
		}
	}
	return c, nil
}

// runSacctmgrChange runs add, modify or delete: read, edit, check, ask
// (unless -i), write; once more from a fresh read if the file changed.
func runSacctmgrChange(e *slurmEnv, verb, entity string, args []string, immediate bool) error {
	switch verb {
	case "create":
		verb = "add"
	case "update":
		verb = "modify"
	case "remove":
		verb = "delete"
	}
	switch {
	case strings.HasPrefix(entity, "qos"):
		entity = "qos"
	case strings.HasPrefix(entity, "account"):
		entity = "account"
	case strings.HasPrefix(entity, "user"):
		entity = "user"
	default:
		return acctFail(fmt.Sprintf(" Berth's sacctmgr %s works on qos, account and user; not %s", verb, entity))
	}
	a := parseAcctArgs(verb, args)
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "sacctmgr: error: "+err.Error())
	}
	ctx := e.ctx
	for attempt := 0; ; attempt++ {
		f, err := c.PolicyFile(ctx)
		if err != nil {
			return slurmFail(1, "sacctmgr: error: "+err.Error())
		}
		text, err := editPolicy(ctx, c, f, verb, entity, a)
		if err != nil {
			return err
		}
		if attempt == 0 {
			io.WriteString(e.stdout, text.out)
			if !immediate && !commitAnswer(e.stdin, e.stdout) {
				fmt.Fprintln(e.stdout, " Changes Discarded")
				return nil
			}
		}
		_, err = c.PutPolicyFile(ctx, text.text, f.Version)
		if errors.Is(err, client.ErrConflict) && attempt == 0 {
			continue // changed meanwhile: the same change, on the new text
		}
		if err != nil {
			return slurmFail(1, " Error with request: "+err.Error())
		}
		return syncProjects(e, c, verb, entity, a, text.edits)
	}
}

// syncProjects carries a change of the file's accounts and users to the
// server's projects and members, which decide who may submit where and
// see what: the server makes the file's accounts projects, and its users
// (those who are Berth users) members, as it reads the file; what is
// removed from the file is removed here, and a user added who is not a
// Berth user is made one (as sacctmgr add user makes Slurm's).
func syncProjects(e *slurmEnv, c *client.Client, verb, entity string, a acctArgs, edits []acctEdit) error {
	var failed []string
	note := func(err error) {
		if err != nil && !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrConflict) {
			failed = append(failed, err.Error())
		}
	}
	switch {
	case entity == "account" && verb == "add":
		for _, ed := range edits {
			if len(ed.path) == 2 && ed.path[0] == "projects" && !ed.del {
				_, err := c.CreateProject(e.ctx, ed.path[1])
				note(err)
			}
		}
	case entity == "account" && verb == "delete":
		for _, ed := range edits {
			if len(ed.path) == 2 && ed.path[0] == "projects" && ed.del {
				note(c.DeleteProject(e.ctx, ed.path[1]))
			}
		}
	case entity == "user" && verb == "add":
		for _, u := range a.names {
			if _, err := c.CreateUser(e.ctx, api.UserRequest{Name: u}); err == nil {
				fmt.Fprintf(e.stderr, " Berth user %s created (a member of the accounts above)\n", u)
			} else {
				note(err)
			}
		}
	case entity == "user" && verb == "delete":
		for _, ed := range edits {
			if len(ed.path) == 4 && ed.path[0] == "projects" && ed.path[2] == "users" && ed.del {
				note(c.RemoveMember(e.ctx, ed.path[1], ed.path[3]))
			}
		}
	}
	if len(failed) > 0 {
		return slurmFail(1, append([]string{" The policy file is changed, but not all of the projects' members:"}, failed...)...)
	}
	return nil
}

type editedPolicy struct {
	out, text string
	edits     []acctEdit
}

// editPolicy makes the change on the file's text and checks the result.
func editPolicy(ctx context.Context, c *client.Client, f *api.PolicyFile, verb, entity string, a acctArgs) (*editedPolicy, error) {
	name := orStr(f.Path, "policy.yml")
	doc, err := policy.ParseDoc(name, []byte(f.Text))
	if err != nil {
		return nil, slurmFail(1, "sacctmgr: error: "+err.Error())
	}
	p, err := policy.Parse(name, []byte(f.Text))
	if err != nil {
		return nil, slurmFail(1, "sacctmgr: error: the policy file in force does not parse: "+err.Error())
	}
	var active []api.Run
	if verb == "delete" && entity != "qos" {
		if active, err = c.Runs(ctx, client.ListOptions{Spec: true}); err != nil {
			return nil, slurmFail(1, "sacctmgr: error: "+err.Error())
		}
	}
	var ch *acctChange
	switch entity {
	case "qos":
		ch, err = qosChange(doc, p, verb, a)
	case "account":
		ch, err = accountChange(doc, verb, a, active)
	default:
		var known []string
		if verb == "add" {
			// Projects made with berth project create are accounts too.
			ps, err := c.Projects(ctx, false)
			if err != nil {
				return nil, slurmFail(1, "sacctmgr: error: "+err.Error())
			}
			for _, p := range ps {
				known = append(known, p.Name)
			}
		}
		ch, err = userChange(doc, verb, a, active, known)
	}
	if err != nil {
		return nil, err
	}
	for _, ed := range ch.edits {
		if ed.del {
			doc.Delete(ed.path...)
		} else if err := doc.Set(ed.value, ed.path...); err != nil {
			return nil, slurmFail(1, "sacctmgr: error: "+err.Error())
		}
	}
	text := doc.Bytes()
	if _, err := policy.Parse(name, text); err != nil {
		return nil, slurmFail(1, " Error with request: the change would leave the policy file invalid: "+err.Error(), " Nothing changed")
	}
	return &editedPolicy{out: ch.out.String(), text: string(text), edits: ch.edits}, nil
}

// commitAnswer asks as sacctmgr does and reads the answer: y commits;
// anything else, end of input or 30 seconds of silence discards.
func commitAnswer(in io.Reader, out io.Writer) bool {
	fmt.Fprint(out, "Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): ")
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		answer <- line
	}()
	select {
	case line := <-answer:
		if line == "" {
			fmt.Fprintln(out) // end of input: no answer, no newline typed
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true
		}
		return false
	case <-time.After(30 * time.Second):
		fmt.Fprintln(out, "timeout")
		return false
	}
}
