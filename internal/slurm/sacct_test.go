package slurm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const tres1 = "billing=1,cpu=1,mem=1000M,node=1"

// acct builds the accounting record of one job of the golden scenario.
type acctBuilder struct{ r AcctRecord }

func anAcct(id uint32, name string) *acctBuilder {
	return &acctBuilder{AcctRecord{JobID: id, JobName: name, Partition: "debug", Account: "root", User: "root",
		Group: "root", QOS: "normal", State: JobCompleted, TimeLimit: Unlimited, ReqTRES: tres1, AllocTRES: tres1,
		NodeList: "localhost"}}
}

func (b *acctBuilder) times(submit, start, end string) *acctBuilder {
	b.r.Submit, b.r.Eligible, b.r.Start, b.r.End = at(submit), at(submit), at(start), at(end)
	b.r.Elapsed = at(end).Sub(at(start))
	return b
}
func (b *acctBuilder) task(array uint32, task int) *acctBuilder {
	b.r.ArrayJobID, b.r.ArrayTaskID = array, task
	return b
}
func (b *acctBuilder) with(f func(*AcctRecord)) *acctBuilder { f(&b.r); return b }

// steps returns the job followed by steps with the same times, named and
// sized like the job's batch step.
func (b *acctBuilder) steps(names ...string) []AcctRecord {
	out := []AcctRecord{b.r}
	for _, n := range names {
		s := b.r
		s.Step, s.JobName, s.Partition, s.Reason = n, n, "", ""
		s.AllocTRES = strings.TrimPrefix(b.r.AllocTRES, "billing="+tresCount(b.r.AllocTRES, "billing")+",")
		s.ReqTRES = ""
		if n == "0" {
			s.JobName = b.r.JobName
		}
		out = append(out, s)
	}
	return out
}

func uid0() *uint32 { var u uint32; return &u }

// accounting is what slurmdbd held at the end of the scenario (01:27:45).
func accounting() []AcctRecord {
	var recs []AcctRecord
	add := func(rs ...AcctRecord) { recs = append(recs, rs...) }
	add(anAcct(1, "wrap").times("01:23:11", "01:23:12", "01:23:13").steps()...)
	add(anAcct(2, "wrap").times("01:24:00", "01:24:01", "01:24:02").steps("batch")...)
	timeout := anAcct(3, "timeout").times("01:24:32", "01:24:32", "01:25:54").with(func(r *AcctRecord) {
		r.State, r.TimeLimit = JobTimeout, time.Minute
	}).steps("batch")
	timeout[1].State, timeout[1].ExitSignal = JobCancelled, 15
	add(timeout...)
	add(anAcct(4, "fail3").times("01:24:32", "01:24:32", "01:24:32").with(func(r *AcctRecord) {
		r.State, r.ExitCode = JobFailed, 3
	}).steps("batch")...)
	add(anAcct(5, "envjob").times("01:24:35", "01:24:35", "01:24:35").steps("batch")...)
	add(anAcct(7, "envarr").task(6, 1).times("01:24:38", "01:24:38", "01:24:38").steps("batch")...)
	add(anAcct(6, "envarr").task(6, 2).times("01:24:38", "01:24:41", "01:24:41").steps("batch")...)
	add(anAcct(8, "envgpu").times("01:24:43", "01:24:44", "01:24:44").with(func(r *AcctRecord) {
		r.ReqTRES = "billing=1,cpu=1,gres/gpu=2,mem=2G,node=1"
		r.AllocTRES = r.ReqTRES
	}).steps("batch")...)
	add(anAcct(9, "srunenv").times("01:24:52", "01:24:52", "01:24:52").steps("0")...)
	add(anAcct(11, "wrap").task(10, 1).times("01:26:07", "01:26:09", "01:26:29").steps("batch")...)
	add(anAcct(12, "wrap").task(10, 2).times("01:26:07", "01:26:09", "01:26:29").steps("batch")...)
	waited := func(reason string) func(*AcctRecord) { return func(r *AcctRecord) { r.Reason = reason } }
	add(anAcct(23, "wrap").task(10, 3).times("01:26:07", "01:26:30", "01:26:50").with(waited(ReasonJobArrayTaskLimit)).steps("batch")...)
	add(anAcct(10, "wrap").task(10, 4).times("01:26:07", "01:26:30", "01:26:50").with(waited(ReasonJobArrayTaskLimit)).steps("batch")...)
	add(anAcct(13, "wrap").times("01:26:09", "01:26:50", "01:27:20").steps("batch")...)
	add(anAcct(14, "wrap").times("01:26:09", "01:26:50", "01:27:20").steps("batch")...)
	add(anAcct(15, "dep").times("01:26:09", "01:27:20", "01:27:25").with(waited(ReasonDependency)).steps("batch")...)
	neverRan := func(reason, end string) func(*AcctRecord) {
		return func(r *AcctRecord) {
			r.State, r.CancelledBy, r.Reason = JobCancelled, uid0(), reason
			r.Eligible, r.Start, r.End, r.Elapsed = time.Time{}, TimeNone, at(end), 0
			r.NodeList, r.AllocTRES = "None assigned", ""
		}
	}
	add(anAcct(16, "depnever").times("01:26:09", "01:26:09", "01:26:09").with(neverRan(ReasonDependencyNeverSatisfied, "01:27:44")).r)
	add(anAcct(17, "held").times("01:26:09", "01:26:09", "01:26:09").with(neverRan(ReasonJobHeldUser, "01:26:21")).r)
	add(anAcct(18, "later").times("01:26:09", "01:26:09", "01:26:09").with(neverRan(ReasonBeginTime, "01:27:44")).with(func(r *AcctRecord) {
		r.Eligible = at("02:26:09")
	}).r)
	add(anAcct(19, "gpujob").times("01:26:09", "01:27:28", "01:27:38").with(func(r *AcctRecord) {
		r.ReqTRES = "billing=2,cpu=2,gres/gpu=2,mem=4G,node=1"
		r.AllocTRES, r.TimeLimit = r.ReqTRES, 10*time.Minute
	}).steps("batch")...)
	add(anAcct(20, "wrap").times("01:26:22", "01:26:22", "01:26:28").with(neverRan(ReasonPartitionConfig, "01:26:28")).with(func(r *AcctRecord) {
		r.Eligible, r.TimeLimit, r.ReqTRES = at("01:26:22"), 0, "billing=4,cpu=4,mem=4000M,node=1"
	}).r)
	add(anAcct(21, "wrap").times("01:26:22", "01:26:22", "01:26:22").with(func(r *AcctRecord) {
		r.State, r.ExitCode, r.TimeLimit = JobFailed, 1, 0
		r.NodeList, r.AllocTRES = "None assigned", ""
	}).r)
	add(anAcct(22, "wrap").times("01:26:22", "01:27:24", "01:27:24").with(func(r *AcctRecord) {
		r.TimeLimit = 365 * 24 * time.Hour
	}).steps("batch")...)
	return recs
}

// midway is the accounting at 01:26:55: jobs 13 and 14 running, 19 and
// 22 still pending.
func midway() []AcctRecord {
	var out []AcctRecord
	for _, r := range accounting() {
		switch r.JobID {
		case 13, 14:
			r.State, r.End = JobRunning, time.Time{}
		case 19, 22:
			if r.Step != "" {
				continue
			}
			r.State, r.Start, r.End = JobPending, time.Time{}, time.Time{}
		case 15:
			continue
		}
		out = append(out, r)
	}
	return out
}

func multinodeAccounting() []AcctRecord {
	job := anAcct(13707, "multi").times("01:57:23", "01:57:24", "01:57:39").with(func(r *AcctRecord) {
		r.NodeList, r.NNodes = "n[1-2]", 2
		r.AllocTRES = "billing=4,cpu=4,mem=4000M,node=2"
	})
	recs := job.steps("batch", "0", "1")
	recs[1].NodeList, recs[1].NNodes, recs[1].NTasks = "n1", 1, 1
	recs[2].JobName, recs[2].NTasks = "hostname", 4
	recs[3].JobName, recs[3].NTasks = "bash", 4
	recs = append(recs,
		anAcct(13708, "gpu2n").times("01:57:23", "01:57:24", "01:57:39").with(func(r *AcctRecord) {
			r.NodeList, r.AllocTRES = "n[3-4]", "billing=2,cpu=2,gres/gpu=6,mem=2000M,node=2"
		}).r,
		anAcct(13709, "single").times("01:57:23", "01:57:24", "01:57:39").with(func(r *AcctRecord) { r.NodeList = "n3" }).r)
	return recs
}

func TestSacctGolden(t *testing.T) {
	now := at("01:27:45")
	jobs := func(ids ...string) []JobSelector {
		sels, err := ParseJobSelectors(strings.Join(ids, ","))
		if err != nil {
			panic(err)
		}
		return sels
	}
	states := func(s string) []JobState {
		st, _, err := ParseStateList(s)
		if err != nil {
			panic(err)
		}
		return st
	}
	midnight := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	allStates := "-o JobID,JobName,State,ExitCode,DerivedExitCode,Reason,Elapsed,Submit,Start,End,AllocCPUS,ReqMem,AllocTRES,NodeList"
	tests := []struct {
		file string
		recs []AcctRecord
		f    AcctFilter
		o    SacctOptions
	}{
		{"sacct.txt", accounting(), AcctFilter{Now: now}, SacctOptions{}},
		{"sacct-midway.txt", midway(), AcctFilter{Now: at("01:26:55")}, SacctOptions{}},
		{"sacct-X-all-states.txt", accounting(), AcctFilter{Now: now}, SacctOptions{NoSteps: true, Parsable2: true, Format: strings.TrimPrefix(allStates, "-o ")}},
		{"sacct-X-all-states-S-today.txt", accounting(), AcctFilter{Now: now, Start: midnight}, SacctOptions{NoSteps: true, Parsable2: true, Format: "JobID,JobName,State,ExitCode,Reason,Elapsed,NodeList"}},
		{"sacct-X-n-P-state.txt", accounting(), AcctFilter{Now: now}, SacctOptions{NoSteps: true, NoHeader: true, Parsable2: true, Format: "JobID,State"}},
		{"sacct-long-fmt.txt", accounting(), AcctFilter{Now: now}, SacctOptions{Format: "JobID,JobName%10,Partition,State,ExitCode,Elapsed,Timelimit,AllocTRES%45,NodeList"}},
		{"sacct-duplicates-array.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("10")}, SacctOptions{Parsable2: true, Format: "JobID,JobIDRaw,State,ExitCode"}},
		{"sacct-j-parsable2-array.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("10")}, SacctOptions{Parsable2: true, Format: "JobID,JobIDRaw,State,ExitCode,NodeList"}},
		{"sacct-j-parsable2-timeout.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("3")}, SacctOptions{Parsable2: true, Format: "JobID,State,ExitCode,NodeList"}},
		{"sacct-j-parsable2.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("4")}, SacctOptions{Parsable2: true, Format: "JobID,State,ExitCode,NodeList"}},
		{"sacct-j-never-started.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("16", "17", "18")}, SacctOptions{Parsable2: true, Format: "JobID,JobName,State,ExitCode,Reason,Eligible,Start,End,NodeList"}},
		{"sacct-j-unknown.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("999999")}, SacctOptions{}},
		{"sacct-j-arraytask-cancelled-pending.txt", accounting(), AcctFilter{Now: now, Jobs: jobs("10_5")}, SacctOptions{}},
		{"sacct-state-CA-F-TO-S-E.txt", accounting(), AcctFilter{Now: now, States: states("CA,F,TO"), Start: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}, SacctOptions{NoSteps: true, Parsable2: true, Format: "JobID,JobName,State,ExitCode,Reason"}},
		{"sacct-state-CA-S-E-now.txt", accounting(), AcctFilter{Now: now, States: states("CA"), Start: midnight, End: now}, SacctOptions{NoSteps: true, Parsable2: true, Format: "JobID,State"}},
		{"sacct-state-CA-S-today.txt", accounting(), AcctFilter{Now: now, States: states("CA"), Start: midnight}, SacctOptions{NoSteps: true, Parsable2: true, Format: "JobID,JobName,State,ExitCode,Reason"}},
		{"sacct-state-CA.txt", accounting(), AcctFilter{Now: now, States: states("CA")}, SacctOptions{NoSteps: true, Parsable2: true, Format: "JobID,JobName,State,ExitCode,Reason"}},
		{"sacct-state-F-TO-S-today.txt", accounting(), AcctFilter{Now: now, States: states("F,TO"), Start: midnight}, SacctOptions{NoSteps: true, Parsable2: true, Format: "JobID,JobName,State,ExitCode"}},
		{"multinode/sacct-multinode.txt", multinodeAccounting(), AcctFilter{Now: at("01:58:00"), Jobs: jobs("13707", "13708", "13709")}, SacctOptions{NoSteps: true, Format: "JobID,JobName,NNodes,AllocCPUS,State,ExitCode,AllocTRES%40,NodeList%20"}},
		{"multinode/sacct-multinode-steps.txt", multinodeAccounting(), AcctFilter{Now: at("01:58:00"), Jobs: jobs("13707")}, SacctOptions{Parsable2: true, Format: "JobID,JobName,NNodes,NTasks,State,NodeList"}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			g := readGolden(t, tc.file)
			out, err := FormatSacct(FilterAcct(tc.recs, tc.f), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			assertGolden(t, tc.file, g.stdout, out)
		})
	}
}

func TestSacctLongGolden(t *testing.T) {
	var recs []AcctRecord
	for _, r := range accounting() {
		if r.JobID == 19 {
			recs = append(recs, r)
		}
	}
	recs[0].Extra = map[string]string{"ReqCPUFreqMin": "Unknown", "ReqCPUFreqMax": "Unknown", "ReqCPUFreqGov": "Unknown"}
	recs[1].NTasks = 1
	recs[1].Extra = map[string]string{"AveCPUFreq": "0", "ReqCPUFreqMin": "0", "ReqCPUFreqMax": "0", "ReqCPUFreqGov": "0",
		"ConsumedEnergy": "0", "TRESUsageInAve": "energy=0", "TRESUsageInTot": "energy=0", "TRESUsageOutAve": "energy=0", "TRESUsageOutTot": "energy=0"}
	g := readGolden(t, "sacct-l-j.txt")
	out, err := FormatSacct(recs, SacctOptions{Long: true})
	if err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "sacct-l-j.txt", g.stdout, out)
}

func TestSacctAccountingDisabledGolden(t *testing.T) {
	g := readGolden(t, "sacct-acct-none.txt")
	e := AccountingDisabledError()
	if strings.Join(e.Stderr, "\n")+"\n" != g.stderr || e.ExitCode != g.exit {
		t.Errorf("%q %d", e.Stderr, e.ExitCode)
	}
}

func TestSacctFormatErrors(t *testing.T) {
	_, err := FormatSacct(nil, SacctOptions{Format: "JobID,Bogus"})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Stderr[0] != `sacct: error: Invalid field requested: "Bogus"` || ce.ExitCode != 1 {
		t.Errorf("%v", err)
	}
	out, err := FormatSacct(accounting()[:2], SacctOptions{Parsable: true, Format: "jobid,state,maxrss"}) // "st" would be Start, the first match
	if err != nil {
		t.Fatal(err)
	}
	want := "JobID|State|MaxRSS|\n1|COMPLETED||\n2|COMPLETED||\n"
	if out != want {
		t.Errorf("parsable:\n%q\nwant\n%q", out, want)
	}
	rss := accounting()[:1]
	rss[0].MaxRSS = 2396160
	out, _ = FormatSacct(rss, SacctOptions{Parsable2: true, NoHeader: true, Format: "MaxRSS", Delimiter: ";"})
	if out != "2340K\n" {
		t.Errorf("MaxRSS %q", out)
	}
}

func TestTRESStrings(t *testing.T) {
	tres := map[string]uint64{"cpu": 2, "mem": 4096, "node": 1, "billing": 2, "gres/gpu": 2}
	if s := SacctTRES(tres); s != "billing=2,cpu=2,gres/gpu=2,mem=4G,node=1" {
		t.Errorf("SacctTRES = %q", s)
	}
	if s := ScontrolTRES(tres); s != "cpu=2,mem=4G,node=1,billing=2,gres/gpu=2" {
		t.Errorf("ScontrolTRES = %q", s)
	}
}
