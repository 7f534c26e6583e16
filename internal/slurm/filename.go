package slurm

import (
	"strconv"
	"strings"
)

// NoArrayTask is the array task id of a job that is not in an array. Slurm
// prints it (NO_VAL) where a pattern asks for %a anyway.
const NoArrayTask = -1

// FilenameContext is what a --output/--error/--input pattern can refer to.
type FilenameContext struct {
	JobID       uint32
	ArrayJobID  uint32 // 0 when not an array task
	ArrayTaskID int    // NoArrayTask when not an array task
	StepID      int    // -1 for the batch step
	JobName     string
	User        string
	Node        string // host the batch shell runs on (%N)
	NodeID      int    // %n
	TaskID      int    // %t
	WorkDir     string // relative patterns are relative to it
}

const filenameMaxWidth = 10

// ExpandFilename expands an output file pattern as slurmd does for a batch
// job (fname_create): %j job id, %J job id (plus .step for steps), %A array
// job id (the job id outside arrays), %a array task id, %x job name, %u
// user, %N node, %n node id, %t task id, %s step ("batch"), %% a percent. A
// number after % zero-pads a numeric field ("%5j", at most 10 digits).
// Unknown escapes stay as written. A pattern holding a backslash is not
// expanded at all, only its backslashes removed. A relative result is put
// under WorkDir. An empty pattern gives Slurm's default, slurm-%J.out, or
// slurm-%A_%a.out for an array task.
func ExpandFilename(pattern string, c FilenameContext) string {
	if pattern == "" {
		pattern = "slurm-%J.out"
		if c.ArrayTaskID != NoArrayTask {
			pattern = "slurm-%A_%a.out"
		}
	}
	esc, escaped := RemovePathSlashes(pattern)
	name := ""
	if !strings.HasPrefix(pattern, "/") {
		name = c.WorkDir
		if escaped {
			return name + esc // Slurm adds no slash here
		}
		if !strings.HasSuffix(name, "/") {
			name += "/"
		}
	}
	if escaped {
		return esc
	}
	return name + expandBatchPattern(pattern, c)
}

// RemovePathSlashes is Slurm's remove_path_slashes: "\\" gives "\", a lone
// backslash is dropped, and the name is then taken literally (no %
// patterns); ok is false when there was none.
func RemovePathSlashes(p string) (string, bool) {
	if !strings.Contains(p, `\`) {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			if i+1 < len(p) && p[i+1] == '\\' {
				b.WriteByte('\\')
				i++
			}
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String(), true
}

// expandBatchPattern is _create_batch_fname, index for index.
func expandBatchPattern(path string, c FilenameContext) string {
	var name strings.Builder
	q, p := 0, 0
	for p < len(path) {
		if path[p] != '%' {
			p++
			continue
		}
		if p+1 < len(path) && path[p+1] == '%' {
			p++
			name.WriteString(path[q:p])
			p++
			q = p
			continue
		}
		p++
		wid := 0
		if p < len(path) && path[p] >= '0' && path[p] <= '9' {
			name.WriteString(path[q : p-1])
			start := p
			for p < len(path) && path[p] >= '0' && path[p] <= '9' {
				p++
			}
			w, err := strconv.Atoi(path[start:p])
			if err != nil || w > filenameMaxWidth {
				w = filenameMaxWidth
			}
			wid = w
			q = p - 1
			if p >= len(path) {
				break
			}
		}
		if p >= len(path) {
			break
		}
		val, ok := batchEscape(path[p], wid, c)
		if ok {
			name.WriteString(path[q : p-1])
			name.WriteString(val)
			p++
			q = p
		}
	}
	if q != p {
		name.WriteString(path[q:p])
	}
	return name.String()
}

func batchEscape(ch byte, wid int, c FilenameContext) (string, bool) {
	num := func(n uint64) string {
		s := strconv.FormatUint(n, 10)
		if len(s) < wid {
			s = strings.Repeat("0", wid-len(s)) + s
		}
		return s
	}
	task := uint64(0xfffffffe)
	if c.ArrayTaskID != NoArrayTask {
		task = uint64(c.ArrayTaskID)
	}
	switch ch {
	case 'a':
		return num(task), true
	case 'A':
		if c.ArrayTaskID == NoArrayTask {
			return num(uint64(c.JobID)), true
		}
		return num(uint64(c.ArrayJobID)), true
	case 'j', 'J':
		s := num(uint64(c.JobID))
		if ch == 'J' && c.StepID >= 0 {
			s += "." + strconv.Itoa(c.StepID)
		}
		return s, true
	case 'n':
		return num(uint64(c.NodeID)), true
	case 'N':
		return c.Node, true
	case 's':
		if c.StepID < 0 {
			return "batch", true
		}
		return num(uint64(c.StepID)), true
	case 't':
		return num(uint64(c.TaskID)), true
	case 'u':
		return c.User, true
	case 'x':
		return c.JobName, true
	}
	return "", false
}

// displayPath is how scontrol shows StdOut/StdErr (_fname_format): only %A,
// %a, %j, %u and %x are replaced, and a relative path is put under the work
// directory.
func displayPath(pattern string, j *Job) string {
	task := uint64(0xfffffffe)
	if j.ArrayJobID != 0 && j.ArrayTasks == nil {
		task = uint64(j.ArrayTaskID)
	}
	arrayJob := uint64(j.JobID)
	if task != 0xfffffffe {
		arrayJob = uint64(j.ArrayJobID)
	}
	s := strings.ReplaceAll(pattern, "%A", strconv.FormatUint(arrayJob, 10))
	s = strings.ReplaceAll(s, "%a", strconv.FormatUint(task, 10))
	s = strings.ReplaceAll(s, "%j", strconv.FormatUint(uint64(j.JobID), 10))
	s = strings.ReplaceAll(s, "%u", j.User)
	s = strings.ReplaceAll(s, "%x", j.Name)
	if strings.HasPrefix(s, "/") {
		return s
	}
	return j.WorkDir + "/" + s
}
