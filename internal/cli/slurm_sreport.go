package cli

import (
	"fmt"
	"math"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

// sreport's two reports most sites read, from GET /usage: cluster
// AccountUtilizationByUser and user TopUsage, CPU time by default, in the
// layout of Slurm 22.05's src/sreport (the header block, columns, widths
// and time formats), reconstructed from its source: no slurmdbd was at hand
// to compare bytes against.

var sreportOptions = []slurmOpt{
	{"time", 't', reqArg}, {"parsable", 'p', noArg}, {"parsable2", 'P', noArg}, {"noheader", 'n', noArg},
	{"help", 'h', noArg}, {"usage", 0, noArg}, {"version", 'V', noArg}, {"verbose", 'v', noArg},
	{"quiet", 'Q', noArg}, {"all_clusters", 'a', noArg}, {"cluster", 'M', reqArg},
}

const sreportUsage = "Usage: sreport [-t hours|minutes|seconds|percent|...] [-n] [-p|-P] cluster AccountUtilizationByUser|user TopUsage [start=TIME] [end=TIME] [accounts=A,B] [users=U,V] [topcount=N]\n"

// sreportTime is sreport -t: how a usage prints, and its header's words.
type sreportTime struct {
	name    string // "Minutes", "Percentage of Total", "Hours/Percentage of Total"
	div     float64
	percent bool // the share of the total only
	both    bool // the amount and the share
}

func parseSreportTime(s string) (sreportTime, error) {
	l := strings.ToLower(s)
	for _, t := range []struct {
		prefix string
		t      sreportTime
	}{
		{"secper", sreportTime{"Seconds/Percentage of Total", 1, false, true}},
		{"minper", sreportTime{"Minutes/Percentage of Total", 60, false, true}},
		{"hourper", sreportTime{"Hours/Percentage of Total", 3600, false, true}},
		{"seconds", sreportTime{"Seconds", 1, false, false}},
		{"minutes", sreportTime{"Minutes", 60, false, false}},
		{"hours", sreportTime{"Hours", 3600, false, false}},
		{"percent", sreportTime{"Percentage of Total", 1, true, false}},
	} {
		if l != "" && strings.HasPrefix(t.prefix, l) {
			return t.t, nil
		}
	}
	return sreportTime{}, slurmFail(1, "sreport: error: unknown time format "+s+": use seconds, minutes, hours, percent, secper, minper or hourper")
}

// format is slurmdb_report_print_time's text of value against total.
func (t sreportTime) format(value, total float64) string {
	if total <= 0 {
		total = 1
	}
	pct := value / total * 100
	switch {
	case t.percent:
		return fmt.Sprintf("%.2f%%", pct)
	case t.both && t.div == 1:
		return fmt.Sprintf("%d(%.2f%%)", uint64(value), pct)
	case t.both:
		return fmt.Sprintf("%.0f(%.2f%%)", value/t.div, pct)
	case t.div == 1:
		return strconv.FormatUint(uint64(value), 10)
	}
	return fmt.Sprintf("%.0f", value/t.div)
}

// usageWidth is sreport_set_usage_col_width: 8, one more per digit of the
// largest usage in seconds past 10^8, 9 more with a percentage.
func (t sreportTime) usageWidth(maxSeconds float64) int {
	w := 8
	for order := 1e8; order < 1e25 && maxSeconds >= order; order *= 10 {
		w++
	}
	if t.both {
		w += 9
	}
	return w
}

func runSreport(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sreport", args, sreportOptions, true)
	if err != nil {
		return err
	}
	tf, _ := parseSreportTime("minutes")
	var parsable, parsable2, noHeader bool
	for _, g := range got {
		switch g.name {
		case "time":
			if tf, err = parseSreportTime(g.val); err != nil {
				return err
			}
		case "parsable":
			parsable = true
		case "parsable2":
			parsable2 = true
		case "noheader":
			noHeader = true
		case "help", "usage":
			fmt.Fprint(e.stdout, sreportUsage)
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		}
	}
	if len(rest) < 2 {
		return &slurm.CommandError{Stdout: sreportUsage, Stderr: []string{"sreport: error: give a report: cluster AccountUtilizationByUser or user TopUsage"}, ExitCode: 1}
	}
	kind, report := strings.ToLower(rest[0]), strings.ToLower(rest[1])
	now := e.now()
	// Slurm's default window: yesterday, midnight to midnight.
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
	start, end := today.AddDate(0, 0, -1), today
	var accounts, users []string
	top := 10
	for _, kv := range rest[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return slurmFail(1, " Unknown condition: "+kv)
		}
		switch lk := strings.ToLower(k); {
		case strings.HasPrefix(lk, "start"), strings.HasPrefix(lk, "end"):
			t, err := slurm.ParseBegin(v, now, true)
			if err != nil {
				return slurmFail(1, fmt.Sprintf(" Bad time given: %s: %v", v, err))
			}
			if lk[0] == 's' {
				start = t
			} else {
				end = t
			}
		case strings.HasPrefix(lk, "account"):
			accounts = append(accounts, splitList(v)...)
		case strings.HasPrefix(lk, "user"):
			users = append(users, splitList(v)...)
		case strings.HasPrefix(lk, "topcount"):
			if top, err = strconv.Atoi(v); err != nil || top < 1 {
				return slurmFail(1, " Bad TopCount value: "+v)
			}
		case strings.HasPrefix(lk, "cluster"):
		default:
			return slurmFail(1, " Unknown condition: "+kv)
		}
	}
	// slurmdbd's rollups are hourly: the window is whole hours.
	start, end = start.Truncate(time.Hour), end.Truncate(time.Hour)
	if !start.Before(end) {
		end = start.Add(time.Hour)
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "sreport: error: Problem talking to the database: Unable to contact slurm controller (connect failure)")
	}
	rep, err := c.Usage(e.ctx, client.UsageQuery{Since: start, Until: end})
	if err != nil {
		return slurmFail(1, "sreport: error: Problem talking to the database: "+err.Error())
	}
	w := &sreportOut{tf: tf, parsable: parsable, parsable2: parsable2, noHeader: noHeader, start: start, end: end}
	switch {
	case kind == "cluster" && strings.HasPrefix("accountutilizationbyuser", report) && len(report) >= 2:
		w.accountByUser(e, rep, accounts, users)
	case kind == "user" && strings.HasPrefix("topusage", report) && len(report) >= 1:
		w.topUsage(e, rep, accounts, users, top)
	default:
		return slurmFail(1, fmt.Sprintf("sreport: error: Berth's sreport has cluster AccountUtilizationByUser and user TopUsage; not %s %s", rest[0], rest[1]))
	}
	return nil
}

type sreportOut struct {
	tf                            sreportTime
	parsable, parsable2, noHeader bool
	start, end                    time.Time
}

// header is the block above a report's columns.
func (o *sreportOut) header(e *slurmEnv, title string) {
	if o.noHeader {
		return
	}
	line := strings.Repeat("-", 80)
	fmt.Fprintln(e.stdout, line)
	fmt.Fprintf(e.stdout, "%s %s - %s (%d secs)\n", title, o.start.Format("2006-01-02T15:04:05"), o.end.Add(-time.Second).Format("2006-01-02T15:04:05"),
		int(o.end.Sub(o.start).Seconds()))
	if o.tf.percent {
		fmt.Fprintf(e.stdout, "Usage reported in %s\n", o.tf.name)
	} else {
		fmt.Fprintf(e.stdout, "Usage reported in CPU %s\n", o.tf.name)
	}
	fmt.Fprintln(e.stdout, line)
}

// properName is the login's full name (the first field of its GECOS).
func properName(login string) string {
	u, err := user.Lookup(login)
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(u.Name, ",")
	return name
}

func (o *sreportOut) accountByUser(e *slurmEnv, rep *api.UsageReport, accounts, users []string) {
	o.header(e, "Cluster/Account/User Utilization")
	total := rep.Capacity["cpu"]
	var root float64
	type row struct {
		account, login string
		cpu            float64
	}
	var rows []row
	for _, r := range rep.Rows {
		if len(accounts) > 0 && !slices.Contains(accounts, r.Project) || r.User != "" && len(users) > 0 && !slices.Contains(users, r.User) {
			continue
		}
		if r.User == "" {
			root += r.TRESSeconds["cpu"]
		}
		rows = append(rows, row{r.Project, r.User, r.TRESSeconds["cpu"]})
	}
	width := o.tf.usageWidth(root)
	header := []string{"Cluster", "Account", "Login", "Proper Name", "Used", "Energy"}
	widths := []int{9, 15, 9, 15, width, o.tf.usageWidth(0)}
	cells := [][]string{{slurmconv.ClusterName, "root", "", "", o.tf.format(math.Floor(root), total), o.tf.format(0, total)}}
	for _, r := range rows {
		proper := ""
		if r.login != "" {
			proper = properName(r.login)
		}
		cells = append(cells, []string{slurmconv.ClusterName, r.account, r.login, proper, o.tf.format(math.Floor(r.cpu), total), o.tf.format(0, total)})
	}
	printSacctmgr(e.stdout, header, widths, cells, o.noHeader, o.parsable, o.parsable2)
}

func (o *sreportOut) topUsage(e *slurmEnv, rep *api.UsageReport, accounts, users []string, top int) {
	o.header(e, fmt.Sprintf("Top %d Users", top))
	total := rep.Capacity["cpu"]
	type row struct {
		login    string
		accounts []string
		cpu      float64
	}
	by := map[string]*row{}
	for _, r := range rep.Rows {
		if r.User == "" || len(accounts) > 0 && !slices.Contains(accounts, r.Project) || len(users) > 0 && !slices.Contains(users, r.User) {
			continue
		}
		x := by[r.User]
		if x == nil {
			x = &row{login: r.User}
			by[r.User] = x
		}
		x.accounts = append(x.accounts, r.Project)
		x.cpu += r.TRESSeconds["cpu"]
	}
	var rows []*row
	for _, x := range by {
		rows = append(rows, x)
	}
	slices.SortFunc(rows, func(a, b *row) int {
		if a.cpu != b.cpu {
			if a.cpu > b.cpu {
				return -1
			}
			return 1
		}
		return strings.Compare(a.login, b.login)
	})
	rows = rows[:min(len(rows), top)]
	biggest := 0.0
	if len(rows) > 0 {
		biggest = rows[0].cpu
	}
	header := []string{"Cluster", "Login", "Proper Name", "Account", "Used", "Energy"}
	widths := []int{9, 9, 15, 15, o.tf.usageWidth(biggest), o.tf.usageWidth(0)}
	var cells [][]string
	for _, r := range rows {
		slices.Sort(r.accounts)
		cells = append(cells, []string{slurmconv.ClusterName, r.login, properName(r.login), strings.Join(r.accounts, ","), o.tf.format(math.Floor(r.cpu), total), o.tf.format(0, total)})
	}
	printSacctmgr(e.stdout, header, widths, cells, o.noHeader, o.parsable, o.parsable2)
}
