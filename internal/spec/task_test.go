package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	valid := func() *Task {
		return &Task{Type: "task", Commands: []string{"echo"}, Nodes: 1}
	}
	tests := map[string]struct {
		mutate func(*Task)
		want   []string
	}{
		"valid":              {mutate: func(*Task) {}},
		"zero defaults ok":   {mutate: func(t *Task) { t.Type, t.Nodes = "", 0 }},
		"wrong type":         {mutate: func(t *Task) { t.Type = "fleet" }, want: []string{`type: "fleet" configurations are not supported by this version of Berth; only "task", "dev-environment" and "service" are`}},
		"no commands":        {mutate: func(t *Task) { t.Commands = nil }, want: []string{"commands: required: give `commands`, or an `image` whose entrypoint does the work"}},
		"image, no commands": {mutate: func(t *Task) { t.Commands, t.Image = nil, "ubuntu" }},
		"priority":           {mutate: func(t *Task) { t.Priority = -1 }, want: []string{"priority: must be between 0 and 100, got -1"}},
		"gpu backwards": {
			mutate: func(t *Task) { t.Resources.GPU = &GPUSpec{Vendor: "nvidea", Count: IntRange{Min: 4, Max: ptr(2)}} },
			want:   []string{`resources.gpu.vendor: unknown value "nvidea"; did you mean "nvidia"? (expected one of: nvidia, amd, tpu, intel, tenstorrent)`, "resources.gpu.count: range 4..2: minimum is greater than maximum"},
		},
		"env": {
			mutate: func(t *Task) { t.Env = Env{{Name: "A"}, {Name: "A"}, {Name: "B-C"}} },
			want:   []string{"env[1]: A is set twice (first at env[0])", `env[2]: invalid variable name "B-C" (use letters, digits and _, not starting with a digit)`},
		},
		"retry": {
			mutate: func(t *Task) { t.Retry = &Retry{} },
			want:   []string{"retry.on_events: must list at least one of: no-capacity, error, interruption"},
		},
		"cron": {
			mutate: func(t *Task) { t.Schedule = &Schedule{Cron: []string{"* * *"}} },
			want:   []string{`schedule.cron[0]: invalid cron expression "* * *": expected 5 fields (minute hour day-of-month month day-of-week), got 3`},
		},
		"durations": {
			mutate: func(t *Task) { t.MaxDuration, t.StopDuration = ptr(Duration(0)), ptr(Duration(-5)) },
			want:   []string{"max_duration: must be positive (use `off` for no limit)", "stop_duration: must not be negative"},
		},
		"repos": {
			mutate: func(t *Task) { t.Repos = []Repo{{LocalPath: "."}, {}} },
			want:   []string{"repos: at most one repo is supported, got 2", "repos[1]: either `local_path` or `url` is required"},
		},
		"repo urls": {
			mutate: func(t *Task) { t.Repos = []Repo{{URL: "https://x:tok@github.com/o/r.git", Branch: "-x", Hash: "XYZ"}} },
			want: []string{"repos[0].url: must not hold a password or token: set the project's secret GIT_TOKEN (berth secret set GIT_TOKEN) and it is used for the clone",
				`repos[0].branch: not a valid branch name: "-x"`, `repos[0].hash: must be a commit hash (4 to 64 lowercase hex digits), got "XYZ"`},
		},
		"repo url scheme": {
			mutate: func(t *Task) { t.Repos = []Repo{{URL: "ftp://h/r.git"}} },
			want:   []string{`repos[0].url: must be https://, http://, ssh://, git://, file:// or user@host:path, got "ftp://h/r.git"`},
		},
		"repo url fine": {mutate: func(t *Task) {
			t.Repos = []Repo{{URL: "git@github.com:o/r.git", Branch: "feature/x", Hash: "0123abcd"}}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task := valid()
			tc.mutate(task)
			err := task.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false")
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := map[string]struct {
		err  *Error
		want string
	}{
		"full":        {err: &Error{File: "a.yml", Line: 3, Col: 5, Field: "resources.gpu", Msg: "bad"}, want: "a.yml:3:5: resources.gpu: bad"},
		"no position": {err: &Error{Field: "env[2]", Msg: "bad"}, want: "env[2]: bad"},
		"syntax":      {err: &Error{File: "a.yml", Line: 1, Col: 2, Msg: "invalid YAML: x"}, want: "a.yml:1:2: invalid YAML: x"},
		"bare":        {err: &Error{Msg: "empty GPU spec"}, want: "empty GPU spec"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.err.Error()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	var joined error = Errors{{Field: "a", Msg: "x"}, {Field: "b", Msg: "y"}}
	if joined.Error() != "a: x\nb: y" || !errors.Is(joined, ErrInvalid) {
		t.Errorf("Errors: %q, Is(ErrInvalid)=%v", joined.Error(), errors.Is(joined, ErrInvalid))
	}
	var one *Error
	if !errors.As(joined, &one) || one.Field != "a" {
		t.Errorf("errors.As did not find the first *Error")
	}
}

func TestSetFields(t *testing.T) {
	src := "type: task\nname: nightly\ncommands: [x]\nresources:\n  gpu: A100\nvolumes: [\"/a:/b\"]\nschedule:\n  cron: \"0 0 * * *\"\n"
	task, err := Parse("f.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"name", "commands", "resources.gpu", "volumes", "schedule"}
	if diff := cmp.Diff(want, task.SetFields()); diff != "" {
		t.Errorf("SetFields mismatch (-want +got):\n%s", diff)
	}
	// The same answer after a JSON round trip, as on the server.
	data, _ := json.Marshal(task)
	var decoded Task
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, decoded.SetFields()); diff != "" {
		t.Errorf("SetFields after JSON mismatch (-want +got):\n%s", diff)
	}
	full := &Task{Nodes: 2, Priority: 5, Resources: Resources{CPU: &CPUSpec{Count: exactly(4)}, Memory: &ByteRange{}, SHMSize: ptr(GB), Disk: &ByteRange{}}, MaxDuration: ptr(Duration(60)), Fleets: []string{"f"}}
	want = []string{"nodes", "resources.cpu", "resources.memory", "resources.shm_size", "resources.disk", "priority", "max_duration", "fleets"}
	if diff := cmp.Diff(want, full.SetFields()); diff != "" {
		t.Errorf("SetFields mismatch (-want +got):\n%s", diff)
	}
}

func TestEnv(t *testing.T) {
	task := &Task{Env: Env{{Name: "HF_TOKEN", PassThrough: true}, {Name: "LR", Value: "0.001"}, {Name: "WANDB", PassThrough: true}}}
	task.SetEnv("LR", "0.002")
	task.SetEnv("NEW", "1")
	env := map[string]string{"HF_TOKEN": "secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	err := task.Env.Resolve(lookup)
	if !errors.Is(err, ErrUnsetEnv) || !strings.Contains(err.Error(), ": WANDB (") {
		t.Fatalf("Resolve error = %v, want ErrUnsetEnv naming WANDB", err)
	}
	if !task.Env[0].PassThrough {
		t.Errorf("a failed Resolve changed the env")
	}
	env["WANDB"] = "w"
	if err := task.Env.Resolve(lookup); err != nil {
		t.Fatal(err)
	}
	want := []string{"HF_TOKEN=secret", "LR=0.002", "WANDB=w", "NEW=1"}
	if diff := cmp.Diff(want, task.Env.Strings()); diff != "" {
		t.Errorf("Strings mismatch (-want +got):\n%s", diff)
	}
	unresolved := Env{{Name: "A", PassThrough: true}, {Name: "B", Value: "2"}}
	if diff := cmp.Diff([]string{"B=2"}, unresolved.Strings()); diff != "" {
		t.Errorf("unresolved Strings mismatch (-want +got):\n%s", diff)
	}
	err = Env{{Name: "X", PassThrough: true}, {Name: "Y", PassThrough: true}}.Resolve(func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "X, Y") {
		t.Errorf("Resolve error = %v, want both names", err)
	}
}

func TestResourcesString(t *testing.T) {
	tests := map[string]struct {
		in   Resources
		want string
	}{
		"empty": {in: Resources{}, want: ""},
		"plan example": {
			in:   Resources{CPU: &CPUSpec{Count: IntRange{Min: 2}}, Memory: &ByteRange{Min: 8 * GB}, GPU: &GPUSpec{Names: []string{"A100"}, Memory: &ByteRange{Min: 80 * GB, Max: ptr(80 * GB)}, Count: exactly(2)}, Disk: &ByteRange{Min: 100 * GB}},
			want: "2..xCPU, 8GB.., A100:80GB:2, 100GB.. (disk)",
		},
		"everything": {
			in:   Resources{CPU: &CPUSpec{Arch: "arm", Count: exactly(4)}, GPU: &GPUSpec{Vendor: "nvidia", TotalMemory: &ByteRange{Min: 160 * GB}, ComputeCapability: "8.0", Count: IntRange{Min: 1, Max: ptr(8)}}, SHMSize: ptr(16 * GB)},
			want: "4xCPU (arm), nvidia:1..8 (total 160GB.., cc 8.0), 16GB (shm)",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.in.String()); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
