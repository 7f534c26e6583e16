package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/slurm"
)

var scancelOptions = []slurmOpt{
	{"account", 'A', reqArg}, {"batch", 'b', noArg}, {"ctld", 0, noArg}, {"cron", 0, noArg}, {"full", 'f', noArg},
	{"help", 0, noArg}, {"hurry", 'H', noArg}, {"interactive", 'i', noArg}, {"cluster", 'M', reqArg},
	{"clusters", 0, reqArg}, {"name", 'n', reqArg}, {"jobname", 0, reqArg}, {"partition", 'p', reqArg},
	{"qos", 'q', reqArg}, {"quiet", 'Q', noArg}, {"reservation", 'R', reqArg}, {"sibling", 0, reqArg},
	{"signal", 's', reqArg}, {"state", 't', reqArg}, {"usage", 0, noArg}, {"user", 'u', reqArg},
	{"verbose", 'v', noArg}, {"version", 'V', noArg}, {"nodelist", 'w', reqArg}, {"wckey", 0, reqArg},
	{"me", 0, noArg},
}

const scancelUsage = `Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]
  -A, --account=account           act only on jobs charging this account
  -b, --batch                     signal batch shell for specified job
  -f, --full                      signal batch shell and all steps for specified job
  -H, --hurry                     avoid burst buffer stage out
  -i, --interactive               require response from user for each job
      --me                        equivalent to --user=<my username>
  -n, --name=job_name             act only on jobs with this name
  -p, --partition=partition       act only on jobs in this partition
  -Q, --quiet                     disable warnings
  -q, --qos=qos                   act only on jobs with this quality of service
  -s, --signal=name | integer     signal to send to job, default is SIGKILL
  -t, --state=states              act only on jobs in this state.  Valid job
                                  states are PENDING, RUNNING and SUSPENDED
  -u, --user=user_name            act only on jobs of this user
  -V, --version                   output version information and exit
  -v, --verbose                   verbosity level
  -w, --nodelist                  act only on jobs on these nodes

Help options:
  --help                          show this help message
  --usage                         display brief usage message

In Berth a job is cancelled as with berth stop: SIGTERM to its processes, then
SIGKILL after the server's --stop-grace; --signal=KILL kills it at once (berth
stop --abort). Other signals (--signal=USR1, …) go to the tasks of the running
job's srun steps, as in Slurm (a job running no step gets nothing), and the job
goes on; with -b to the batch shell only, with -f to the batch shell and its
steps (every process of the job).
`

func runScancel(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("scancel", args, scancelOptions, true)
	if err != nil {
		return err
	}
	var (
		f        slurm.JobFilter
		verbose  bool
		quiet    bool
		abort    bool
		batch    bool
		full     bool
		forward  int // a signal to send rather than cancel
		nodelist []string
		filtered bool
	)
	for _, g := range got {
		switch g.name {
		case "help":
			io.WriteString(e.stdout, scancelUsage)
			return nil
		case "usage":
			fmt.Fprintln(e.stdout, "Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name] [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer] [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name] [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey] [--me] [job_id[_array_id][.step_id]]")
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "account":
			f.Accounts, filtered = append(f.Accounts, splitList(g.val)...), true
		case "name", "jobname":
			f.Names, filtered = append(f.Names, splitList(g.val)...), true
		case "partition":
			f.Partitions, filtered = append(f.Partitions, splitList(g.val)...), true
		case "qos":
			f.QOS, filtered = append(f.QOS, splitList(g.val)...), true
		case "quiet":
			quiet = true
		case "signal":
			sig := slurm.SignalNumber(g.val)
			switch sig {
			case 9:
				abort = true
			case 15, 2, 1, 3:
			case 0:
				return slurmFail(1, "scancel: error: Invalid job signal: "+g.val)
			default:
				forward = sig
			}
		case "batch":
			batch = true
		case "full":
			full = true
		case "state":
			st, _, err := slurm.ParseStateList(g.val)
			if err != nil {
				return slurmFail(1, "scancel: error: Invalid job state specified: "+g.val)
			}
			f.States, filtered = append(f.States, st...), true
		case "user":
			f.Users, filtered = append(f.Users, splitList(g.val)...), true
		case "me":
			f.Users, filtered = append(f.Users, currentUserName(e)), true
		case "verbose":
			verbose = true
		case "nodelist":
			hosts, err := slurm.ExpandHostlist(g.val)
			if err != nil {
				return slurmFail(1, "scancel: error: Invalid node list "+g.val)
			}
			nodelist, filtered = append(nodelist, hosts...), true
		}
	}
	_ = quiet
	var ids []string
	var steps [][2]string // job, step of JOB.STEP items
	for _, a := range rest {
		for _, item := range splitOutsideBrackets(a) {
			if item == "" {
				continue
			}
			if job, step, ok := strings.Cut(item, "."); ok {
				sels, err := parseJobList("scancel", job)
				if _, nerr := strconv.Atoi(step); err != nil || nerr != nil || len(sels) != 1 {
					return slurmFail(1, "scancel: error: Invalid job id "+item)
				}
				steps = append(steps, [2]string{sels[0].String(), step})
				continue
			}
			sels, err := parseJobList("scancel", item)
			if err != nil {
				return slurmFail(1, "scancel: error: Invalid job id "+item)
			}
			for _, s := range sels {
				ids = append(ids, s.String())
			}
		}
	}
	if len(ids) == 0 && len(steps) == 0 && !filtered {
		return slurmFail(1, "scancel: error: No job identification provided")
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "scancel: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	// Steps are cancelled on their own: the job goes on.
	for _, js := range steps {
		id, _ := strconv.Atoi(js[1])
		if err := c.CancelStep(e.ctx, js[0], id); err != nil {
			reason := "Invalid job id specified"
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && !errors.Is(err, client.ErrNotFound) {
				reason = apiMessage(apiErr)
				if m := slurmReasonRE().FindStringSubmatch(reason); m != nil {
					reason = m[1]
				}
			}
			fmt.Fprintf(e.stderr, "scancel: error: Kill job error on job step id %s.%s: %s\n", js[0], js[1], reason)
		}
	}
	if len(ids) == 0 && !filtered {
		return nil
	}
	if filtered {
		v, err := fetchView(e, "scancel", runSelection{})
		if err != nil {
			return err
		}
		jobs := v.Jobs()
		if len(nodelist) > 0 {
			jobs = onNodes(jobs, nodelist)
		}
		if len(ids) > 0 {
			sels, _ := slurm.ParseJobSelectors(strings.Join(ids, ","))
			f.Jobs = sels
		}
		var matched []string
		for _, j := range slurm.FilterJobs(jobs, f) {
			switch {
			case j.ArrayTasks != nil:
				for _, t := range j.ArrayTasks {
					matched = append(matched, fmt.Sprintf("%d_%d", j.ArrayJobID, t))
				}
			case j.ArrayJobID != 0:
				matched = append(matched, fmt.Sprintf("%d_%d", j.ArrayJobID, j.ArrayTaskID))
			default:
				matched = append(matched, fmt.Sprint(j.JobID))
			}
		}
		ids = matched
	}
	failed := map[string]string{}
	for _, id := range ids {
		var err error
		if forward != 0 {
			// As Slurm 22.05 (job_signal, _kill_all_active_steps): -b
			// the batch shell only (also with -f), -f (--full) the batch
			// shell and every step, neither the steps only.
			_, err = c.SignalRun(e.ctx, id, api.SignalRequest{Signal: forward, BatchOnly: batch, StepsOnly: !batch && !full})
		} else {
			_, err = c.Stop(e.ctx, id, abort)
		}
		if err != nil {
			if errors.Is(err, client.ErrNotFound) {
				failed[id] = "Invalid job id specified"
				continue
			}
			var apiErr *client.APIError
			if errors.As(err, &apiErr) {
				failed[id] = apiMessage(apiErr)
				if m := slurmReasonRE().FindStringSubmatch(failed[id]); m != nil {
					failed[id] = m[1]
				}
				continue
			}
			return slurmFail(1, "scancel: error: "+err.Error())
		}
	}
	for _, l := range slurm.ScancelMessages(ids, verbose, failed) {
		fmt.Fprintln(e.stderr, l)
	}
	if code := slurm.ScancelExit(failed); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}
