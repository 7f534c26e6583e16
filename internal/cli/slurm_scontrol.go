package cli

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/slurm"
	"github.com/berth-hq/berth/internal/slurmconv"
)

var scontrolOptions = []slurmOpt{
	{"all", 'a', noArg}, {"details", 'd', noArg}, {"federation", 0, noArg}, {"future", 'F', noArg},
	{"help", 'h', noArg}, {"hide", 0, noArg}, {"local", 0, noArg}, {"cluster", 'M', reqArg}, {"clusters", 0, reqArg},
	{"oneliner", 'o', noArg}, {"quiet", 'Q', noArg}, {"sibling", 0, noArg}, {"usage", 'u', noArg},
	{"verbose", 'v', noArg}, {"version", 'V', noArg}, {"json", 0, noArg}, {"yaml", 0, noArg},
}

const scontrolUsage = `scontrol [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -a or --all: equivalent to "all" command
     -d or --details: equivalent to "details" command
     -h or --help: equivalent to "help" command
     -o or --oneliner: equivalent to "oneliner" command
     -Q or --quiet: equivalent to "quiet" command
     -V or --version: equivalent to "version" command

  Valid <COMMAND> values (those Berth implements) are:
     hold <job_list>          prevent specified job from starting.
     release <job_list>       permit specified job to start.
     requeue <job_id>         re-queue a batch job.
     show <ENTITY> [<ID>]     display state of identified entity, default
                              is all records: job, node, partition,
                              hostnames, hostlist.
     update <SPECIFICATIONS>  update job: JobId=<id> with TimeLimit=
                              (also of a running job; +=, -=), Comment=,
                              Priority=, Nice=, ArrayTaskThrottle=.
     version                  display tool version number.
`

func runScontrol(e *slurmEnv, args []string) error {
	got, rest, err := getoptLong("scontrol", args, scontrolOptions, false)
	if err != nil {
		return err
	}
	oneLiner, quiet := false, false
	for _, g := range got {
		switch g.name {
		case "help", "usage":
			io.WriteString(e.stdout, scontrolUsage)
			return nil
		case "version":
			fmt.Fprintln(e.stdout, slurmVersion)
			return nil
		case "oneliner":
			oneLiner = true
		case "quiet":
			quiet = true
		}
	}
	_ = quiet
	if len(rest) == 0 {
		return slurmFail(1, "scontrol: error: Berth's scontrol has no interactive mode: give a command (scontrol --help)")
	}
	verb, rest := strings.ToLower(rest[0]), rest[1:]
	switch {
	case verb == "show" || verb == "list":
		return scontrolShow(e, rest, oneLiner)
	case verb == "hold" || verb == "uhold" || verb == "release" || verb == "requeue" || verb == "requeuehold":
		return scontrolControl(e, verb, rest)
	case verb == "update":
		return scontrolUpdate(e, rest)
	case verb == "version":
		fmt.Fprintln(e.stdout, slurmVersion)
		return nil
	case verb == "help":
		io.WriteString(e.stdout, scontrolUsage)
		return nil
	case verb == "ping":
		c, err := e.newClient()
		if err == nil {
			_, err = c.Status(e.ctx)
		}
		state := "UP"
		if err != nil {
			state = "DOWN"
		}
		fmt.Fprintf(e.stdout, "Slurmctld(primary) at berth is %s\n", state)
		return nil
	case verb == "suspend" || verb == "resume":
		return slurmFail(1, fmt.Sprintf("scontrol: error: %s is not supported by Berth", verb))
	}
	return slurmFail(1, "invalid keyword: "+verb)
}

func scontrolShow(e *slurmEnv, args []string, oneLiner bool) error {
	if len(args) == 0 {
		return slurmFail(1, "too few arguments for keyword:show")
	}
	entity := strings.ToLower(args[0])
	id := ""
	if len(args) > 1 {
		id = args[1]
	}
	switch {
	case strings.HasPrefix("hostnames", entity) && len(entity) >= 5:
		if id == "" {
			id = e.getenv("SLURM_JOB_NODELIST")
		}
		out, err := slurm.ShowHostnames(id)
		if err != nil {
			return err
		}
		io.WriteString(e.stdout, out)
		return nil
	case entity == "hostlist" || entity == "hostlistsorted":
		var hosts []string
		for _, part := range strings.Split(id, ",") {
			h, err := slurm.ExpandHostlist(part)
			if err != nil {
				return slurmFail(1, "Invalid hostlist: "+id)
			}
			hosts = append(hosts, h...)
		}
		if entity == "hostlistsorted" {
			sort.Strings(hosts)
		}
		fmt.Fprintln(e.stdout, slurm.CompressHostlist(hosts))
		return nil
	case entity == "job" || entity == "jobs" || entity == "jobid":
		return scontrolShowJob(e, id, oneLiner)
	case entity == "node" || entity == "nodes":
		v, err := fetchView(e, "scontrol", runSelection{})
		if err != nil {
			return err
		}
		_, nodes := slurmconv.Nodes(v.Nodes, v.Now, v.Policy)
		if id != "" {
			want, err := slurm.ExpandHostlist(id)
			if err != nil {
				return slurmFail(1, "Invalid node name specified")
			}
			var keep []slurm.Node
			for _, n := range nodes {
				if contains(want, n.Name) {
					keep = append(keep, n)
				}
			}
			if len(keep) == 0 {
				return &slurm.CommandError{Stdout: fmt.Sprintf("Node %s not found\n", id), ExitCode: 1}
			}
			nodes = keep
		}
		if len(nodes) == 0 {
			fmt.Fprintln(e.stdout, "No nodes in the system")
			return nil
		}
		io.WriteString(e.stdout, slurm.ShowNodes(nodes, oneLiner))
		return nil
	case entity == "partition" || entity == "partitions":
		v, err := fetchView(e, "scontrol", runSelection{})
		if err != nil {
			return err
		}
		parts, _ := slurmconv.Nodes(v.Nodes, v.Now, v.Policy)
		if id != "" {
			var keep []slurm.Partition
			for _, p := range parts {
				if p.Name == id {
					keep = append(keep, p)
				}
			}
			if len(keep) == 0 {
				return &slurm.CommandError{Stdout: fmt.Sprintf("Partition %s not found\n", id), ExitCode: 1}
			}
			parts = keep
		}
		io.WriteString(e.stdout, slurm.ShowPartitions(parts, oneLiner))
		return nil
	case len(entity) >= 4 && strings.HasPrefix("config", entity):
		return scontrolShowConfig(e)
	case entity == "step" || entity == "steps":
		fmt.Fprintln(e.stdout, "No job steps in the system")
		return nil
	}
	return slurmFail(1, "invalid entity:"+args[0]+" for keyword:show")
}

func scontrolShowJob(e *slurmEnv, id string, oneLiner bool) error {
	sel := inMemory(e.now())
	var sels []slurm.JobSelector
	if id != "" {
		var err error
		if sels, err = parseJobList("scontrol", id); err != nil || len(sels) != 1 {
			return slurmFail(1, "Invalid job id specified")
		}
		sel = namedJobs(sel, sels)
	}
	v, err := fetchView(e, "scontrol", sel)
	if err != nil {
		return err
	}
	jobs := v.Jobs()
	if id == "" {
		if len(jobs) == 0 {
			fmt.Fprintln(e.stdout, "No jobs in the system")
			return nil
		}
		sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].JobID > jobs[b].JobID })
		io.WriteString(e.stdout, slurm.ShowJobs(jobs, oneLiner, v.Now))
		return nil
	}
	one := sels[0]
	if !v.Known(one) {
		if one.Task != slurm.NoArrayTask && v.Known(slurm.JobSelector{JobID: one.JobID, Task: slurm.NoArrayTask}) {
			return slurm.JobNotFoundError(id)
		}
		return slurm.InvalidJobIDError()
	}
	jobs = slurm.FilterJobs(jobs, slurm.JobFilter{Jobs: sels, AllStates: true})
	// Tasks first, highest id first, then the array's pending record, as
	// scontrol lists an array.
	sort.SliceStable(jobs, func(a, b int) bool {
		if (jobs[a].ArrayTasks == nil) != (jobs[b].ArrayTasks == nil) {
			return jobs[a].ArrayTasks != nil
		}
		return jobs[a].JobID > jobs[b].JobID
	})
	io.WriteString(e.stdout, slurm.ShowJobs(jobs, oneLiner, v.Now))
	return nil
}

// jobRefs turns scontrol's job list arguments into the server's run
// references ("12", "12_3").
func jobRefs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		sels, err := parseJobList("scontrol", a)
		if err != nil {
			return nil, err
		}
		for _, s := range sels {
			out = append(out, s.String())
		}
	}
	return out, nil
}

func controlError(prefix string, err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return slurmFail(1, prefix+": Invalid job id specified")
	}
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		msg := apiMessage(apiErr)
		if m := slurmReasonRE().FindStringSubmatch(msg); m != nil {
			msg = m[1]
		}
		return slurmFail(1, prefix+": "+msg)
	}
	return slurmFail(1, prefix+": Unable to contact slurm controller (connect failure): "+err.Error())
}

func scontrolControl(e *slurmEnv, verb string, args []string) error {
	if len(args) == 0 {
		return slurmFail(1, "too few arguments for keyword:"+verb)
	}
	refs, err := jobRefs(args)
	if err != nil {
		return err
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "scontrol: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	action, prefix := verb, "slurm_update error"
	switch verb {
	case "uhold":
		action = "hold"
	case "requeue", "requeuehold":
		action, prefix = "requeue", "slurm_requeue error"
	}
	var failed error
	for _, ref := range refs {
		if _, err := c.Control(e.ctx, ref, api.ControlRequest{Action: action}); err != nil {
			failed = controlError(prefix, err)
			var ce *slurm.CommandError
			if errors.As(failed, &ce) {
				for _, l := range ce.Stderr {
					fmt.Fprintln(e.stderr, l)
				}
			}
			continue
		}
		if verb == "requeuehold" {
			if _, err := c.Control(e.ctx, ref, api.ControlRequest{Action: "hold"}); err != nil {
				failed = controlError("slurm_update error", err)
			}
		}
	}
	if failed != nil {
		return &ExitError{Code: 1}
	}
	return nil
}

// scontrolUpdate is `scontrol update JobId=N Key=Value…`.
func scontrolUpdate(e *slurmEnv, args []string) error {
	var (
		ref string
		req = api.ControlRequest{Action: "update"}
		any bool
	)
	var pairs []string
	for _, a := range args {
		if l := strings.ToLower(a); strings.HasPrefix(l, "comment=") || strings.HasPrefix(l, "reason=") {
			pairs = append(pairs, a) // a comment or a reason may hold spaces
			continue
		}
		pairs = append(pairs, strings.Fields(a)...)
	}
	for _, p := range pairs {
		// scontrol's _update_it: the entity is the first key that names one.
		k, _, _ := strings.Cut(p, "=")
		switch strings.ToLower(k) {
		case "nodename":
			return scontrolUpdateNode(e, pairs)
		case "partitionname":
			return scontrolUpdatePartition(e, pairs)
		}
	}
	for _, p := range pairs {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			return slurmFail(1, "Invalid input: "+p, "Request aborted")
		}
		// TimeLimit+=30 and TimeLimit-=30 are TimeLimit=+30 and TimeLimit=-30.
		if strings.HasSuffix(k, "+") || strings.HasSuffix(k, "-") {
			k, val = k[:len(k)-1], k[len(k)-1:]+val
		}
		switch strings.ToLower(k) {
		case "jobid", "job":
			ref = val
		case "timelimit":
			cur := time.Duration(0)
			add := 0
			if strings.HasPrefix(val, "+") || strings.HasPrefix(val, "-") {
				add = map[byte]int{'+': 1, '-': -1}[val[0]]
				val = val[1:]
				if ref == "" {
					return slurmFail(1, "JobId must precede TimeLimit increment or decrement")
				}
				run, err := scontrolRun(e, ref)
				if err != nil {
					return err
				}
				cur = slurmconv.TimeLimit(run.Spec)
				if cur == slurm.Unlimited {
					return slurmFail(1, "slurm_update error: Invalid time limit specification")
				}
			}
			d, err := slurm.ParseTimeLimit(val)
			if err != nil {
				return slurmFail(1, "Invalid TimeLimit value: "+val, "Request aborted")
			}
			if add < 0 && d != slurm.Unlimited && d > cur {
				return slurmFail(1, fmt.Sprintf("TimeLimit decrement larger than current time limit (%d > %d)", d/time.Minute, cur/time.Minute))
			}
			secs := int64(0)
			if d != slurm.Unlimited && d != 0 {
				secs = int64((cur + time.Duration(add)*d) / time.Second)
				if add == 0 {
					secs = int64(d / time.Second)
				}
				if secs <= 0 {
					return slurmFail(1, "slurm_update error: Invalid time limit specification")
				}
			}
			req.TimeLimit, any = &secs, true
		case "comment":
			req.Tags, any = map[string]string{slurmconv.TagComment: val}, true
		case "priority":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return slurmFail(1, "Invalid Priority value: "+val, "Request aborted")
			}
			pr := int(min(n, 100))
			req.Priority, any = &pr, true
		case "nice":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return slurmFail(1, "Invalid Nice value: "+val, "Request aborted")
			}
			req.Nice, any = &n, true
		case "arraytaskthrottle":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return slurmFail(1, "Invalid ArrayTaskThrottle value: "+val, "Request aborted")
			}
			req.ArrayThrottle, any = &n, true
		default:
			return slurmFail(1, fmt.Sprintf("Update of this parameter is not supported: %s", p), "Request aborted")
		}
	}
	if ref == "" {
		return slurmFail(1, "No valid entity in update command", "Input line must include \"NodeName\", \"PartitionName\", \"Reservation/ReservationName\", \"JobId\", \"StepId\", \"FrontendName\" or \"SwitchName\"")
	}
	if !any {
		return slurmFail(1, "No changes specified")
	}
	refs, err := jobRefs([]string{ref})
	if err != nil {
		return err
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "scontrol: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	for _, r := range refs {
		if _, err := c.Control(e.ctx, r, req); err != nil {
			return controlError("slurm_update error", err)
		}
	}
	return nil
}

// scontrolUpdateNode is `scontrol update NodeName=N State=DRAIN|DOWN
// Reason=…` or `State=RESUME|UNDRAIN` (update_node.c): a drain or a down
// node gets no new jobs; RESUME lifts either. Only an admin may.
func scontrolUpdateNode(e *slurmEnv, pairs []string) error {
	var names []string
	state, reason, count := "", "", 0
	for _, p := range pairs {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			return slurmFail(1, "Invalid input: "+p, "Request aborted")
		}
		switch strings.ToLower(k) {
		case "nodename":
			h, err := slurm.ExpandHostlist(val)
			if err != nil {
				return slurmFail(1, "slurm_update error: Invalid node name specified")
			}
			names = h
		case "reason":
			reason = strings.Trim(val, `"`)
			count++
		case "state":
			v := strings.ToUpper(val)
			switch {
			case len(v) >= 3 && strings.HasPrefix("DRAIN", v):
				state = "drain"
			case len(v) >= 3 && strings.HasPrefix("DOWN", v):
				state = "down"
			case len(v) >= 3 && (strings.HasPrefix("RESUME", v) || strings.HasPrefix("UNDRAIN", v) || strings.HasPrefix("IDLE", v)):
				state = "resume"
			default:
				return slurmFail(1, "Invalid input: "+p, "Request aborted",
					"Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN",
					"Not all states are valid given a node's prior state")
			}
			count++
		default:
			return slurmFail(1, "Update of this parameter is not supported: "+p, "Request aborted")
		}
	}
	if (state == "drain" || state == "down") && reason == "" {
		return slurmFail(1, "You must specify a reason when DOWNING or DRAINING a node. Request denied")
	}
	if count == 0 {
		return slurmFail(1, "No changes specified")
	}
	if state == "" {
		return slurmFail(1, "Update of this parameter is not supported: Reason="+reason, "Request aborted")
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "scontrol: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	for _, n := range names {
		var err error
		if state == "resume" {
			_, err = c.Resume(e.ctx, n)
		} else {
			_, err = c.SetDrain(e.ctx, n, api.DrainRequest{Reason: reason, Down: state == "down"})
		}
		if err != nil {
			return updateError(err, "Invalid node name specified")
		}
	}
	return nil
}

// scontrolUpdatePartition is `scontrol update PartitionName=X State=UP|DOWN`
// (update_part.c): the state is kept in the policy file's `partitions:`
// (the server's, changed through it as sacctmgr changes it, so only an
// admin may), and a DOWN partition takes no new starts (PartitionDown).
func scontrolUpdatePartition(e *slurmEnv, pairs []string) error {
	name, state := "", ""
	for _, p := range pairs {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			return slurmFail(1, "Invalid input: "+p, "Request aborted")
		}
		switch k = strings.ToLower(k); {
		case k == "partitionname":
			name = val
		case len(k) >= 2 && strings.HasPrefix("state", k):
			switch v := strings.ToUpper(val); {
			case v != "" && strings.HasPrefix("UP", v):
				state = "up"
			case v != "" && strings.HasPrefix("DOWN", v):
				state = "down"
			case v != "" && (strings.HasPrefix("DRAIN", v) || strings.HasPrefix("INACTIVE", v)):
				return slurmFail(1, "scontrol: error: Berth's partitions are UP or DOWN, not "+val)
			default:
				return slurmFail(1, "scontrol: error: Invalid input: "+p, "scontrol: error: Acceptable State values are UP, DOWN, DRAIN and INACTIVE")
			}
		default:
			return slurmFail(1, "Update of this parameter is not supported: "+p, "Request aborted")
		}
	}
	if state == "" {
		return slurmFail(1, "No changes specified")
	}
	v, err := fetchView(e, "scontrol", runSelection{})
	if err != nil {
		return err
	}
	parts, _ := slurmconv.Nodes(v.Nodes, v.Now, v.Policy)
	if !slices.ContainsFunc(parts, func(p slurm.Partition) bool { return p.Name == name }) {
		return slurmFail(1, "slurm_update error: Invalid partition name specified")
	}
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "scontrol: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	for attempt := 0; ; attempt++ {
		f, err := c.PolicyFile(e.ctx)
		if err != nil {
			return updateError(err, "Invalid partition name specified")
		}
		doc, err := policy.ParseDoc(orStr(f.Path, "policy.yml"), []byte(f.Text))
		if err != nil {
			return slurmFail(1, "slurm_update error: "+err.Error())
		}
		if state == "up" {
			doc.Delete("partitions", name)
			if len(doc.Keys("partitions")) == 0 {
				doc.Delete("partitions")
			}
		} else if err := doc.Set("down", "partitions", name, "state"); err != nil {
			return slurmFail(1, "slurm_update error: "+err.Error())
		}
		_, err = c.PutPolicyFile(e.ctx, string(doc.Bytes()), f.Version)
		if errors.Is(err, client.ErrConflict) && attempt == 0 {
			continue // changed meanwhile: the same change, on the new text
		}
		if err != nil {
			return updateError(err, "Invalid partition name specified")
		}
		return nil
	}
}

// updateError is slurm_perror("slurm_update error") of a refused update.
func updateError(err error, notFound string) error {
	var apiErr *client.APIError
	switch {
	case errors.Is(err, client.ErrNotFound):
		return slurmFail(1, "slurm_update error: "+notFound)
	case errors.As(err, &apiErr) && (apiErr.Status == http.StatusForbidden || apiErr.Status == http.StatusUnauthorized):
		return slurmFail(1, "slurm_update error: Access/permission denied")
	case errors.As(err, &apiErr):
		return slurmFail(1, "slurm_update error: "+apiMessage(apiErr))
	}
	return slurmFail(1, "slurm_update error: Unable to contact slurm controller (connect failure): "+err.Error())
}

func scontrolRun(e *slurmEnv, ref string) (*api.Run, error) {
	c, err := e.newClient()
	if err != nil {
		return nil, slurmFail(1, "scontrol: error: Unable to contact slurm controller (connect failure): "+err.Error())
	}
	r, err := c.Run(e.ctx, ref)
	if err != nil {
		return nil, controlError("slurm_update error", err)
	}
	return r, nil
}

// scontrolShowConfig is scontrol show config: the slurm.conf keys Berth has
// a value for, in Slurm's order, with the server's settings.
func scontrolShowConfig(e *slurmEnv) error {
	c, err := e.newClient()
	if err != nil {
		return slurmFail(1, "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)")
	}
	st, err := c.Status(e.ctx)
	if err != nil || st.Config == nil {
		return slurmFail(1, "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)")
	}
	host := "localhost"
	if u, err := url.Parse(c.BaseURL()); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	io.WriteString(e.stdout, slurm.ShowConfig(e.now(), configPairs(st), host))
	return nil
}

// configPairs are the keys scontrol show config prints for a Berth server.
func configPairs(st *api.ServerStatus) []slurm.ConfigPair {
	cfg := st.Config
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	sched := "sched/backfill"
	if cfg.Policy == "fcfs" {
		sched = "sched/builtin"
	}
	var params []string
	if cfg.Depth > 0 {
		params = append(params, fmt.Sprintf("bf_max_job_test=%d", cfg.Depth))
	}
	if st.MaxScriptBytes > 0 && st.MaxScriptBytes != 4<<20 {
		params = append(params, fmt.Sprintf("max_script_size=%d", st.MaxScriptBytes))
	}
	schedParams := "(null)"
	if len(params) > 0 {
		schedParams = strings.Join(params, ",")
	}
	w := cfg.Weights
	if w == nil {
		w = &api.Weights{}
	}
	yesNo := map[bool]string{true: "Yes", false: "No"}
	return []slurm.ConfigPair{
		{"ClusterName", slurmconv.ClusterName},
		{"EnforcePartLimits", "NO"},
		{"FirstJobId", "1"},
		{"KillWait", slurm.ConfigSeconds(secs(cfg.StopGrace))},
		{"MaxArraySize", strconv.Itoa(cfg.MaxArraySize)},
		{"MinJobAge", slurm.ConfigSeconds(slurmconv.MinJobAge)},
		{"PriorityDecayHalfLife", slurm.FormatElapsed(secs(cfg.FairshareHalfLife))},
		{"PriorityFavorSmall", yesNo[w.FavorSmall]},
		{"PriorityMaxAge", slurm.FormatElapsed(secs(w.MaxAge))},
		{"PriorityType", "priority/multifactor"},
		{"PriorityWeightAge", strconv.FormatInt(w.Age, 10)},
		{"PriorityWeightAssoc", "0"},
		{"PriorityWeightFairShare", strconv.FormatInt(w.Fairshare, 10)},
		{"PriorityWeightJobSize", strconv.FormatInt(w.JobSize, 10)},
		{"PriorityWeightPartition", strconv.FormatInt(w.Partition, 10)},
		{"PriorityWeightQOS", strconv.FormatInt(w.QOS, 10)},
		{"PriorityWeightTRES", "(null)"},
		{"SchedulerParameters", schedParams},
		{"SchedulerType", sched},
		{"SelectType", "select/cons_tres"},
		{"SlurmdTimeout", slurm.ConfigSeconds(secs(cfg.NodeTimeout))},
		{"SLURM_VERSION", strings.TrimPrefix(slurmVersion, "slurm ")},
		{"UnkillableStepTimeout", slurm.ConfigSeconds(secs(cfg.UnkillableTimeout))},
	}
}
