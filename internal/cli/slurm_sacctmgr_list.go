package cli

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/slurmconv"
)

// sacctmgr list's conditions (names, user=, account=, where) and format=,
// and the associations the server holds: its projects are the accounts,
// their members the users' associations (the policy file adds the shares
// and limits, and, on a machine with no server, is all there is).

// listCond is what a list keeps and shows.
type listCond struct {
	users, accounts []string
	// format is format='s fields and widths, as given (nil: the header).
	format []string
}

func parseListArgs(entity string, args []string) listCond {
	var c listCond
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok {
			if strings.EqualFold(arg, "where") || strings.EqualFold(arg, "withassoc") {
				continue
			}
			k, v = "name", arg
		}
		switch strings.ToLower(k) {
		case "name", "names":
			if strings.HasPrefix(entity, "account") {
				c.accounts = append(c.accounts, splitList(v)...)
			} else {
				c.users = append(c.users, splitList(v)...)
			}
		case "user", "users":
			c.users = append(c.users, splitList(v)...)
		case "account", "accounts", "acct":
			c.accounts = append(c.accounts, splitList(v)...)
		case "format":
			c.format = append(c.format, splitList(v)...)
		}
	}
	return c
}

func (c listCond) keepUser(u string) bool { return len(c.users) == 0 || slices.Contains(c.users, u) }
func (c listCond) keepAccount(a string) bool {
	return len(c.accounts) == 0 || slices.Contains(c.accounts, a)
}

// columns picks format='s columns (by their names, case and spaces aside:
// defaultaccount is Def Acct) and their widths (%N right-aligned, %-N
// left, as Slurm's print fields).
func (c listCond) columns(header []string, rows [][]string) ([]string, []int, [][]string, error) {
	if len(c.format) == 0 {
		return header, nil, rows, nil
	}
	key := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }
	alias := map[string]string{"defaultaccount": "defacct", "fairshare": "share", "shares": "share", "defaultqos": "defqos", "acct": "account"}
	var idx, widths []int
	var out []string
	for _, f := range c.format {
		name, w, _ := strings.Cut(f, "%")
		k := key(name)
		if a, ok := alias[k]; ok {
			k = a
		}
		i := slices.IndexFunc(header, func(h string) bool { return key(h) == k })
		if i < 0 {
			return nil, nil, nil, slurmFail(1, fmt.Sprintf("sacctmgr: error: Unknown field '%s'", name))
		}
		width := 0
		if w != "" {
			n, err := strconv.Atoi(w)
			if err != nil || n == 0 {
				return nil, nil, nil, slurmFail(1, fmt.Sprintf("sacctmgr: error: Bad field width in '%s'", f))
			}
			width = n
		}
		idx, widths, out = append(idx, i), append(widths, width), append(out, header[i])
	}
	picked := make([][]string, len(rows))
	for r, row := range rows {
		picked[r] = make([]string, len(idx))
		for k, i := range idx {
			picked[r][k] = row[i]
		}
	}
	return out, widths, picked, nil
}

// serverAssocs are the server's projects and memberships the caller sees
// (nil: no server answered).
type serverAssocs struct {
	projects []string
	pairs    [][2]string // [account, user]
}

func sacctmgrMembers(e *slurmEnv) *serverAssocs {
	c, err := e.newClient()
	if err != nil {
		return nil
	}
	ps, err := c.Projects(e.ctx, true)
	if err != nil {
		return nil
	}
	out := &serverAssocs{}
	for _, p := range ps {
		out.projects = append(out.projects, p.Name)
		for _, m := range p.Members {
			out.pairs = append(out.pairs, [2]string{m.Project, m.User})
		}
	}
	return out
}

// accounts are the policy file's and the server's projects.
func (s *serverAssocs) accounts(p *policy.Policy) []string {
	out := projects(p)
	if s != nil {
		out = append(out, s.projects...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// users are the [account, user] associations of the file and the server,
// by user then account.
func (s *serverAssocs) users(p *policy.Policy) [][2]string {
	out := users(p)
	if s != nil {
		out = append(out, s.pairs...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][1] != out[j][1] {
			return out[i][1] < out[j][1]
		}
		return out[i][0] < out[j][0]
	})
	return slices.Compact(out)
}

// defAcct is a user's default account: the default project when they
// are in it (as the server chooses), else their first.
func defAcct(pairs [][2]string, user string) string {
	first := ""
	for _, p := range pairs {
		if p[1] != user {
			continue
		}
		if p[0] == slurmconv.DefaultAccount {
			return p[0]
		}
		if first == "" {
			first = p[0]
		}
	}
	return first
}

// adminLevel is sacctmgr's Admin column: Berth's admin user administers.
func adminLevel(user string) string {
	if user == "admin" {
		return "Administrator"
	}
	return "None"
}

func userShare(p *policy.Policy, u [2]string) string {
	if p.Shares != nil && p.Shares.Users[u[0]][u[1]] > 0 {
		return strconv.Itoa(p.Shares.Users[u[0]][u[1]])
	}
	return "1"
}
