package cli

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

// Accounting's commands: berth usage (Berth's own table), sshare (the
// fairshare tree) and sreport's two reports most sites use.

func newUsageCmd() *cobra.Command {
	var project, user, since, until string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show what runs used, by project and user: CPU-hours, GPU-hours, billing, runs",
		Long: `Show the accounting of a window (by default the last day): for each project, and each user
within it, how many runs and jobs ran in it, their CPU-hours, GPU-hours and billing (the fleet's
billing_weights applied to what each job held, per hour; CPU-hours where none are set). A job counts for
the part of its run inside the window; a running job up to now. You see your projects' usage; with
private_data on jobs, only your own unless you manage the project.
--since and --until take Slurm's times (2026-01-02, 2026-01-02T15:04, now-7days, today).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			q := client.UsageQuery{Project: project, User: user}
			now := time.Now()
			for _, t := range []struct {
				flag, v string
				at      *time.Time
			}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
				if t.v == "" {
					continue
				}
				if *t.at, err = slurm.ParseBegin(t.v, now, true); err != nil {
					return fmt.Errorf("%s %q: %w (write e.g. 2026-01-02, now-7days or today)", t.flag, t.v, err)
				}
			}
			rep, err := c.Usage(cmd.Context(), q)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			printUsage(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&project, "project", "", "only this project")
	f.StringVar(&user, "user", "", "only this user")
	f.StringVar(&since, "since", "", "start of the window (default: a day before --until)")
	f.StringVar(&until, "until", "", "end of the window (default: now)")
	f.BoolVar(&asJSON, "json", false, "print the server's answer as JSON (TRES-seconds by Slurm's TRES names)")
	return cmd
}

// printUsage writes berth usage's table: a project's total, then its users.
func printUsage(w io.Writer, rep *api.UsageReport) {
	fmt.Fprintf(w, "Usage %s - %s\n", rep.Since.Local().Format("2006-01-02 15:04:05"), rep.Until.Local().Format("2006-01-02 15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tUSER\tRUNS\tJOBS\tCPU-HOURS\tGPU-HOURS\tBILLING")
	hours := func(v float64) string { return strconv.FormatFloat(v/3600, 'f', 2, 64) }
	for _, r := range rep.Rows {
		user := r.User
		if user == "" {
			user = "(all)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Project, user, r.Runs, r.Jobs, hours(r.TRESSeconds["cpu"]),
			hours(r.TRESSeconds["gres/gpu"]), hours(r.TRESSeconds["billing"]))
	}
	tw.Flush()
}

var sshareOptions = []slurmOpt{
	{"accounts", 'A', reqArg}, {"all", 'a', noArg}, {"long", 'l', noArg}, {"noheader", 'n', noArg},
	{"parsable", 'p', noArg}, {"parsable2", 'P', noArg}, {"users", 'u', reqArg}, {"Users", 'U', noArg},
	{"format", 'o', reqArg}, {"help", 'h', noArg}, {"usage", 0, noArg}, {"version", 'V', noArg},
	{"verbose", 'v', noArg}, {"cluster", 'M', reqArg}, {"clusters", 'M', reqArg}, {"partition", 'm', noArg},
}

const sshareUsage = "Usage: sshare [-A accounts] [-a] [-l] [-n] [-p] [-P] [-u users] [-U] [-o format]\n"

// sshareField is one of sshare's columns: its name and width (negative:
// left-aligned), as src/sshare/process.c sets them.
type sshareField struct {
	name  string
	width int
}

var sshareFields = []sshareField{{"Account", -20}, {"Cluster", 10}, {"EffectvUsage", 13}, {"FairShare", 10}, {"ID", 6},
	{"NormShares", 11}, {"NormUsage", 11}, {"RawShares", 10}, {"RawUsage", 11}, {"User", 10}}

// runSshare is Slurm's sshare (classic fairshare): the tree of projects
// and their users with shares, decayed usage (billing-seconds) and the
// fairshare factor. Without -a, a project's users are the caller only.
func runSshare(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("sshare", args, sshareOptions, true)
	if err != nil {
		return err
	}
	var all, long, noHeader, parsable, parsable2, usersOnly bool
	var accounts, users []string
	format := ""
	for _, g := range got {
		switch g.name {
		case "all":
			all = true
		case "long":
			long = true
		case "noheader":
			noHeader = true
		case "parsable":
			parsable = true
		case "parsable2":
			parsable2 = true
		case "Users":
			usersOnly = true
		case "accounts":
			accounts = append(accounts, splitList(g.val)...)
		case "users":
			users = append(users, splitList(g.val)...)
		case "format":
			format = g.val
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "help", "usage":
			io.WriteString(e.stdout, sshareUsage)
			return nil
		case "partition":
			return slurmFail(1, "sshare: error: -m is not supported by Berth: fairshare is one tree for every fleet")
		}
	}
	if len(rest) > 0 {
		return &slurm.CommandError{Stdout: sshareUsage, Stderr: []string{"sshare: error: Unrecognized option: " + rest[0]}, ExitCode: 1}
	}
	if format == "" {
		format = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"
		if long {
			format = "Account,User,RawShares,NormShares,RawUsage,NormUsage,EffectvUsage,FairShare"
		}
	}
	var fields []sshareField
	for _, item := range splitList(format) {
		name, width, _ := strings.Cut(item, "%")
		i := slices.IndexFunc(sshareFields, func(f sshareField) bool {
			return name != "" && len(name) <= len(f.name) && strings.EqualFold(f.name[:len(name)], name)
		})
		if i < 0 {
			return slurmFail(1, fmt.Sprintf("sshare: error: Invalid field requested: \"%s\"", name))
		}
		f := sshareFields[i]
		if n, err := strconv.Atoi(width); err == nil && n != 0 {
			f.width = n
		}
		fields = append(fields, f)
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "sshare: error: Problem with query: Unable to contact slurm controller (connect failure)")
	}
	tree, err := c.Fairshare(e.ctx)
	if err != nil {
		return slurmFail(1, "sshare: error: Problem with query: "+err.Error())
	}
	me := currentUserName(e)
	if len(users) > 0 {
		all = true // -u names whose rows to show
	}
	header := make([]string, len(fields))
	widths := make([]int, len(fields))
	for i, f := range fields {
		header[i], widths[i] = f.name, f.width
	}
	var rows [][]string
	for i, r := range tree {
		switch {
		case r.Project == "" && (usersOnly || len(accounts) > 0):
			continue
		case r.Project != "" && len(accounts) > 0 && !slices.Contains(accounts, r.Project):
			continue
		case r.User == "" && usersOnly:
			continue
		case r.User != "" && !all && r.User != me:
			continue
		case r.User != "" && len(users) > 0 && !slices.Contains(users, r.User):
			continue
		}
		row := make([]string, len(fields))
		for k, f := range fields {
			row[k] = sshareCell(f, r, i, parsable || parsable2)
		}
		rows = append(rows, row)
	}
	printSacctmgr(e.stdout, header, widths, rows, noHeader, parsable, parsable2)
	return nil
}

// sshareCell is one cell, as sshare prints it: the tree indented in the
// Account column (a user's line names its project, one level deeper),
// doubles with six decimals, usage as a whole number.
func sshareCell(f sshareField, r api.ShareRow, id int, parsable bool) string {
	dbl := func(v float64) string {
		s := strconv.FormatFloat(v, 'f', 6, 64)
		if w := max(f.width, -f.width); !parsable && len(s) > w {
			s = fmt.Sprintf("%.*e", w, v) // print_fields_double's fallback, cut below
		}
		return s
	}
	switch f.name {
	case "Account":
		switch {
		case r.Project == "":
			return "root"
		case r.User == "":
			return " " + r.Project
		}
		return "  " + r.Project
	case "User":
		return r.User
	case "Cluster":
		return clusterName
	case "ID":
		return strconv.Itoa(id + 1)
	case "RawShares":
		if r.Project == "" {
			return ""
		}
		return strconv.Itoa(r.RawShares)
	case "NormShares":
		return dbl(r.NormShare)
	case "RawUsage":
		return strconv.FormatFloat(math.Floor(r.RawUsage), 'f', 0, 64)
	case "NormUsage":
		return dbl(r.NormUsage)
	case "EffectvUsage":
		return dbl(r.EffUsage)
	case "FairShare":
		if r.Project == "" {
			return ""
		}
		return dbl(r.FairShare)
	}
	return ""
}
