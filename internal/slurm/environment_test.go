package slurm

import (
	"strings"
	"testing"
)

func TestBatchEnvironmentGolden(t *testing.T) {
	base := func(id uint32, name string) BatchEnv {
		return BatchEnv{JobID: id, Name: name, Account: "root", Partition: "debug", QOS: "normal", User: "root",
			Nodes: []string{"localhost"}, CPUsPerNode: []int{1}, TasksPerNode: []int{1}, MemPerCPUMB: 1000,
			NodeName: "localhost", SubmitDir: demoDir, SubmitHost: "vm", ClusterName: "local",
			Conf: "/etc/slurm/slurm.conf", Controller: "local:localhost:6817:9728:109"}
	}
	plain := base(5, "envjob")
	plain.TaskPID = 26356
	gpu := base(8, "envgpu")
	gpu.TaskPID, gpu.CPUsPerTask, gpu.MemPerCPUMB, gpu.MemPerNodeMB, gpu.GPUs = 26946, 1, 0, 2048, []int{0, 1}
	task1 := base(7, "envarr")
	task1.TaskPID, task1.ArrayJobID, task1.ArrayTaskID, task1.ArrayTasks = 26546, 6, 1, []int{1, 2}
	task2 := base(6, "envarr")
	task2.TaskPID, task2.ArrayJobID, task2.ArrayTaskID, task2.ArrayTasks = 26693, 6, 2, []int{1, 2}
	multi := base(13707, "multi")
	multi.Nodes, multi.CPUsPerNode, multi.TasksPerNode, multi.NTasks = []string{"n1", "n2"}, []int{2, 2}, []int{2, 2}, 4
	multi.NodeName, multi.TaskPID = "n1", 29143
	tests := map[string]BatchEnv{
		"job-env.txt":                 plain,
		"job-env-gpu.txt":             gpu,
		"job-env-array-task1.txt":     task1,
		"job-env-array-task2.txt":     task2,
		"multinode/job-env-N2-n4.txt": multi,
	}
	for file, e := range tests {
		t.Run(file, func(t *testing.T) {
			g := readRaw(t, file)
			assertGolden(t, file, g, strings.Join(BatchEnvironment(e), "\n")+"\n")
		})
	}
	if s := CompressCounts([]int{4, 4, 4, 2}); s != "4(x3),2" {
		t.Errorf("CompressCounts = %q", s)
	}
}

func TestCommandMessagesGolden(t *testing.T) {
	for file, want := range map[string]string{
		"sbatch.txt":          SubmittedMessage(13, false, ""),
		"sbatch-parsable.txt": SubmittedMessage(14, true, ""),
		"sbatch-array.txt":    SubmittedMessage(10, false, ""),
	} {
		if g := readGolden(t, file); g.stdout != want || g.exit != 0 {
			t.Errorf("%s: %q, want %q", file, want, g.stdout)
		}
	}
	check := func(file string, e *CommandError) {
		t.Helper()
		g := readGolden(t, file)
		got := ""
		if len(e.Stderr) > 0 {
			got = strings.Join(e.Stderr, "\n") + "\n"
		}
		if got != g.stderr || e.ExitCode != g.exit {
			t.Errorf("%s: %q exit %d, want %q exit %d", file, got, e.ExitCode, g.stderr, g.exit)
		}
	}
	check("sbatch-err-bad-partition.txt", InvalidPartitionError("nosuch"))
	check("sbatch-err-too-many-gpus.txt", SubmitFailed("Requested node configuration is not available"))
	check("scancel-v-held.txt", &CommandError{Stderr: ScancelMessages([]string{"17"}, true, nil)})
	check("scancel-v-unknown.txt", &CommandError{Stderr: ScancelMessages([]string{"999999"}, true, map[string]string{"999999": "Invalid job id specified"})})
	check("scancel-unknown.txt", &CommandError{Stderr: ScancelMessages([]string{"999999"}, false, map[string]string{"999999": "Invalid job id specified"})})
	check("scancel-pending-array-task.txt", &CommandError{Stderr: ScancelMessages([]string{"10_5"}, false, nil)})
}
