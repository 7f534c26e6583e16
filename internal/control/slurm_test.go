package control

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

// envMap is an environment list as a map, the last value of a name
// winning (as exec does).
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// At placement a batch job sbatch submitted gets slurmd's environment
// (slurm.BatchEnvironment, from the allocation it got) and its files named
// with its ID (slurm.ExpandFilename); its other nodes host its steps; a
// run without the Slurm part keeps the generic set.
func TestSlurmAppliedAtPlacement(t *testing.T) {
	c := New(Config{})
	sp := &spec.Slurm{Tool: "sbatch", JobName: "Train", User: "alice", UID: 1000, GID: 100, SubmitDir: "/home/alice", SubmitHost: "login1",
		Output: "/home/alice/logs/%x-%A_%a.out", Error: "err-%j-%N.txt", Input: "in.txt", OpenMode: "append",
		NTasks: 4, NTasksPerNode: 2, PerNodeGiven: 2, TasksPerNode: 2, CPUsPerTask: 3, MemPerNodeMB: 2048,
		Script: true, Args: []string{"a b"}, Links: "/opt/links"}
	tk := &spec.Task{Type: "task", Nodes: 2, WorkingDir: "/home/alice/work", Commands: []string{"#!/bin/bash\nsrun hostname\n"},
		Fleets: []string{"gpu"}, QOS: "high", Slurm: sp, Env: spec.Env{{Name: "MY_VAR", Value: "1"}}}
	arr, err := spec.ParseArray("1-5:2")
	if err != nil {
		t.Fatal(err)
	}
	parent := c.newRunState(store.Run{ID: 40}, tk, "alice", "proj")
	parent.array = &arrayState{spec: arr}
	rs := c.newRunState(store.Run{ID: 42, ArrayIndex: 3}, tk, "alice", "proj")
	rs.parent = parent
	j0 := &jobState{run: rs, rec: store.Job{Num: 0, Node: "n1"}, alloc: api.Alloc{CPUs: 6, GPUs: []int{1}}}
	j1 := &jobState{run: rs, rec: store.Job{Num: 1, Node: "n2", Attempt: 2}, alloc: api.Alloc{CPUs: 6}}
	rs.jobs = []*jobState{j0, j1}
	hosts, ips := []string{"n1", "n2"}, []string{"10.0.0.1", "10.0.0.2"}

	a0 := c.assignment(j0, hosts, ips)
	env := envMap(a0.Env)
	for k, v := range map[string]string{
		"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "Train", "SLURM_JOB_ACCOUNT": "proj", "SLURM_JOB_PARTITION": "gpu", "SLURM_JOB_QOS": "high",
		"SLURM_JOB_USER": "alice", "SLURM_JOB_UID": "1000", "SLURM_JOB_GID": "100", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2",
		"SLURM_NODEID": "0", "SLURMD_NODENAME": "n1", "SLURM_CPUS_ON_NODE": "6", "SLURM_JOB_CPUS_PER_NODE": "6(x2)",
		"SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_NTASKS_PER_NODE": "2", "SLURM_CPUS_PER_TASK": "3",
		"SLURM_MEM_PER_NODE": "2048", "SLURM_SUBMIT_DIR": "/home/alice", "SLURM_SUBMIT_HOST": "login1", "SLURM_CLUSTER_NAME": "berth",
		"SLURM_ARRAY_JOB_ID": "40", "SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1",
		"SLURM_ARRAY_TASK_MAX": "5", "SLURM_ARRAY_TASK_STEP": "2", "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "1",
		"CUDA_VISIBLE_DEVICES": "1", "SLURM_RESTART_COUNT": "0", "BERTH_SLURM_STEPS": "1", "BERTH_RUN_ID": "42",
		"DSTACK_NODES_NUM": "2", "MY_VAR": "1",
	} {
		if env[k] != v {
			t.Errorf("job 0: %s=%q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"SLURM_CONF", "SLURM_TASK_PID", "SLURM_WORKING_CLUSTER"} {
		if _, ok := env[k]; ok {
			t.Errorf("job 0 has %s, which only slurmd's process has", k)
		}
	}
	want := &api.BatchScript{Args: []string{"a b"}, Input: "/home/alice/work/in.txt", Output: "/home/alice/logs/Train-40_3.out",
		Error: "/home/alice/work/err-42-n1.txt", Append: true, Links: "/opt/links"}
	if d := cmp.Diff(want, a0.Batch); d != "" {
		t.Errorf("job 0's batch script (-want +got):\n%s", d)
	}
	if len(a0.Commands) != 1 || a0.Commands[0] != tk.Commands[0] {
		t.Errorf("job 0's commands %q, want the script", a0.Commands)
	}

	a1 := c.assignment(j1, hosts, ips)
	env = envMap(a1.Env)
	if a1.Batch != nil || len(a1.Commands) != 1 || !strings.Contains(a1.Commands[0], "step-host") {
		t.Errorf("job 1: batch %+v, commands %q; want it to host the steps", a1.Batch, a1.Commands)
	}
	if env["SLURM_NODEID"] != "1" || env["SLURMD_NODENAME"] != "n2" || env["SLURM_RESTART_COUNT"] != "2" || env["BERTH_SLURM_STEPS"] != "" {
		t.Errorf("job 1: NODEID %q NODENAME %q RESTART_COUNT %q STEPS %q", env["SLURM_NODEID"], env["SLURMD_NODENAME"], env["SLURM_RESTART_COUNT"], env["BERTH_SLURM_STEPS"])
	}

	// Without the Slurm part (berth apply, or sbatch's runs stored with a
	// wrapper): the generic set, the commands as they are.
	plain := &spec.Task{Type: "task", Commands: []string{"true"}, Slurm: &spec.Slurm{Tool: "sbatch", JobName: "old"}}
	prs := c.newRunState(store.Run{ID: 7, Name: "plain"}, plain, "bob", "main")
	pj := &jobState{run: prs, rec: store.Job{Node: "n1"}, alloc: api.Alloc{CPUs: 1}}
	prs.jobs = []*jobState{pj}
	pa := c.assignment(pj, []string{"n1"}, []string{"10.0.0.1"})
	env = envMap(pa.Env)
	if pa.Batch != nil || env["SLURM_JOB_NAME"] != "plain" || env["SLURM_NTASKS"] != "1" || env["SLURM_JOB_ACCOUNT"] != "main" {
		t.Errorf("a run without a batch script: batch %+v, SLURM_JOB_NAME %q, SLURM_NTASKS %q", pa.Batch, env["SLURM_JOB_NAME"], env["SLURM_NTASKS"])
	}
}
