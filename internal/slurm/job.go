package slurm

// Job is placeholder; replaced below.
type Job struct {
	JobID, ArrayJobID uint32
	ArrayTaskID       int
	ArrayTasks        []int
	Name, User        string
	WorkDir           string
}
