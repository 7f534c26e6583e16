package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseErrors pins the exact text, position and order of problems.
func TestParseErrors(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"unknown field with suggestion": {
			in:   "type: task\ncomands:\n  - echo hi\n",
			want: []string{"f.yml:1:1: commands: required: give `commands`, or an `image` whose entrypoint does the work", `f.yml:2:1: comands: unknown field; did you mean "commands"?`},
		},
		"every problem, in file order": {
			in: "type: task\npriority: 101\ncommands: [echo]\nnodes: 0\nspot_policy: spto\nresources:\n  gpu: A100:80GB..40GB\n  cpus: 4\n",
			want: []string{
				"f.yml:2:11: priority: must be between 0 and 100, got 101",
				"f.yml:4:8: nodes: must be at least 1, got 0",
				`f.yml:5:14: spot_policy: unknown value "spto"; did you mean "spot"? (expected one of: spot, on-demand, auto)`,
				`f.yml:7:8: resources.gpu: GPU memory "80GB..40GB": range 80GB..40GB: minimum is greater than maximum`,
				`f.yml:8:3: resources.cpus: unknown field; did you mean "cpu"?`,
			},
		},
		"malformed yaml": {
			in:   "type: task\ncommands: [echo\n",
			want: []string{"f.yml:2:11: invalid YAML: sequence end token ']' not found"},
		},
		"unsupported type": {
			in:   "type: volume\nport: 80\nblah: 1\n",
			want: []string{`f.yml:1:7: type: "volume" configurations are not supported by this version of Berth; only "task", "dev-environment" and "service" are`},
		},
		"unknown type": {
			in:   "type: tsak\ncommands: [x]\n",
			want: []string{`f.yml:1:7: type: unknown configuration type "tsak"; did you mean "task"?; this version of Berth runs "task", "dev-environment" and "service"`},
		},
		"missing type": {
			in:   "commands: [x]\n",
			want: []string{"f.yml:1:1: type: required; add `type: task` at the top"},
		},
		"env problems": {
			in: "type: task\ncommands: [x]\nenv:\n  - GOOD=1\n  - 1BAD=2\n  - GOOD=3\n  - [nested]\n",
			want: []string{
				`f.yml:5:5: env[1]: invalid variable name "1BAD" (use letters, digits and _, not starting with a digit)`,
				"f.yml:6:5: env[2]: GOOD is set twice (first at env[0])",
				"f.yml:7:5: env[3]: must be a string, not a list",
			},
		},
		"env mapping without value": {
			in:   "type: task\ncommands: [x]\nenv:\n  TOKEN:\n",
			want: []string{"f.yml:4:3: env[0]: TOKEN has no value; give one, or use the list form `- TOKEN` to pass it through from your environment"},
		},
		"retry events": {
			in: "type: task\ncommands: [x]\nretry:\n  on_events: [no-capacity, eror, no-capacity]\n  duration: 1x\n",
			want: []string{
				`f.yml:4:28: retry.on_events[1]: unknown value "eror"; did you mean "error"? (expected one of: no-capacity, error, interruption)`,
				`f.yml:4:34: retry.on_events[2]: "no-capacity" is listed twice`,
				`f.yml:5:13: retry.duration: invalid duration "1x" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`,
			},
		},
		"duplicate key": {
			in:   "type: task\ncommands: [x]\nname: a-b\nname: c-d\n",
			want: []string{"f.yml:4:1: name: duplicate key (first set on line 3)"},
		},
		"deprecated field": {
			in:   "type: task\ncommands: [x]\nsetup: [pip install x]\n",
			want: []string{"f.yml:3:1: setup: `setup` is deprecated and has no effect in dstack; move these lines to the start of `commands`"},
		},
		"field of another type": {
			in:   "type: task\ncommands: [x]\nide: vscode\n",
			want: []string{"f.yml:3:6: ide: belongs to dev-environment configurations; add `type: dev-environment` (or remove it)"},
		},
		"python float pitfall": {
			in:   "type: task\ncommands: [x]\npython: 3.1\n",
			want: []string{`f.yml:3:9: python: unsupported version "3.1" (supported: 3.9, 3.10, 3.11, 3.12, 3.13; quote it, e.g. "3.10")`},
		},
		"python with image": {
			in:   "type: task\nimage: ubuntu\npython: \"3.10\"\n",
			want: []string{"f.yml:3:9: python: `python` and `image` are mutually exclusive: the image brings its own Python"},
		},
		"types": {
			in: "type: task\ncommands: python train.py\npriority: high\nprivileged: yes\nresources: 4\n",
			want: []string{
				`f.yml:2:11: commands: must be a list, not a string (e.g. ["python train.py"])`,
				`f.yml:3:11: priority: must be an integer, not "high"`,
				`f.yml:4:13: privileged: must be true or false, not "yes"`,
				"f.yml:5:12: resources: must be a mapping of fields, not an integer",
			},
		},
		"schedule": {
			in: "type: task\ncommands: [x]\nschedule:\n  cron: [\"15 23 * * *\", \"61 * * * *\"]\n",
			want: []string{
				`f.yml:4:25: schedule.cron[1]: invalid cron expression "61 * * * *": minute field "61": 61 is out of range 0..59`,
			},
		},
		"gpu mapping": {
			in: "type: task\ncommands: [x]\nresources:\n  gpu:\n    vendor: nvida\n    count: 8..2\n    colour: red\n",
			want: []string{
				`f.yml:5:13: resources.gpu.vendor: unknown value "nvida"; did you mean "nvidia"? (expected one of: nvidia, amd, tpu, intel, tenstorrent)`,
				"f.yml:6:12: resources.gpu.count: range 8..2: minimum is greater than maximum",
				"f.yml:7:5: resources.gpu.colour: unknown field",
			},
		},
		"ports and volumes": {
			in: "type: task\ncommands: [x]\nports: [8888, 70000, \"a:b\"]\nvolumes:\n  - data\n  - name: v\n    path: data\n  - name: [vol-a, Bad]\n    path: /d\n    optional: true\n",
			want: []string{
				"f.yml:3:15: ports[1]: port 70000 is out of range 1..65535",
				`f.yml:3:22: ports[2]: invalid port "a:b" (expected 8080, 80:8080 or *:8080)`,
				`f.yml:5:5: volumes[0]: invalid volume "data" (expected NAME:/path for a network volume or /host/dir:/path for an instance volume)`,
				`f.yml:6:11: volumes[1].name: "v" is not a volume name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter`,
				`f.yml:7:11: volumes[1].path: must be an absolute path in the container, got "data"`,
				`f.yml:8:19: volumes[2].name[1]: "Bad" is not a volume name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter`,
				`f.yml:10:15: volumes[2].optional: only an instance volume (` + "`instance_path`" + `) may be optional`,
			},
		},
		"empty file": {
			in:   "# nothing\n",
			want: []string{"f.yml:1:1: empty configuration; start with `type: task`"},
		},
		"two documents": {
			in:   "type: task\ncommands: [x]\n---\ntype: task\ncommands: [y]\n",
			want: []string{"f.yml:4:1: a file holds one configuration, found 2 YAML documents"},
		},
		"not a mapping": {
			in:   "- type: task\n",
			want: []string{"f.yml:1:1: must be a mapping of fields, not a list"},
		},
		"utilization": {
			in: "type: task\ncommands: [x]\nutilization_policy:\n  min_gpu_utilization: 120\n",
			want: []string{
				"f.yml:4:3: utilization_policy.time_window: required",
				"f.yml:4:24: utilization_policy.min_gpu_utilization: must be a percentage between 0 and 100, got 120",
			},
		},
		"bad name": {
			in:   "type: task\ncommands: [x]\nname: My_Run\n",
			want: []string{`f.yml:3:7: name: "My_Run" is not a valid run name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task, err := Parse("f.yml", []byte(tc.in))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want errors", task)
			}
			if task != nil {
				t.Errorf("Parse returned a task with errors")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false for %T", err)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err is %T, want Errors", err)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseValues checks exact decoded values of the less common forms.
func TestParseValues(t *testing.T) {
	base := "type: task\ncommands: [x]\n"
	tests := map[string]struct {
		in   string
		get  func(*Task) any
		want any
	}{
		"python 3.10 stays 3.10":  {in: "python: 3.10", get: func(t *Task) any { return t.Python }, want: "3.10"},
		"python quoted":           {in: `python: "3.9"`, get: func(t *Task) any { return t.Python }, want: "3.9"},
		"max_duration off":        {in: "max_duration: off", get: func(t *Task) any { return t.MaxDuration }, want: (*Duration)(nil)},
		"max_duration false":      {in: "max_duration: false", get: func(t *Task) any { return t.MaxDuration }, want: (*Duration)(nil)},
		"max_duration seconds":    {in: "max_duration: 3600", get: func(t *Task) any { return *t.MaxDuration }, want: Duration(3600)},
		"max_duration compound":   {in: "max_duration: 1h30m", get: func(t *Task) any { return *t.MaxDuration }, want: Duration(5400)},
		"stop_duration off":       {in: "stop_duration: off", get: func(t *Task) any { return *t.StopDuration }, want: DurationOff},
		"retry true":              {in: "retry: true", get: func(t *Task) any { return *t.Retry }, want: Retry{OnEvents: []string{"no-capacity", "error", "interruption"}}},
		"retry false":             {in: "retry: false", get: func(t *Task) any { return t.Retry }, want: (*Retry)(nil)},
		"retry duration only":     {in: "retry:\n  duration: 2h", get: func(t *Task) any { return *t.Retry }, want: Retry{OnEvents: []string{"no-capacity", "error", "interruption"}, Duration: ptr(Duration(7200))}},
		"env mapping":             {in: "env:\n  A: 1\n  B: x=y", get: func(t *Task) any { return t.Env }, want: Env{{Name: "A", Value: "1"}, {Name: "B", Value: "x=y"}}},
		"env list":                {in: "env:\n  - HF_TOKEN\n  - LR=0.001\n  - EMPTY=", get: func(t *Task) any { return t.Env }, want: Env{{Name: "HF_TOKEN", PassThrough: true}, {Name: "LR", Value: "0.001"}, {Name: "EMPTY"}}},
		"cron string":             {in: "schedule:\n  cron: \"0 * * * *\"", get: func(t *Task) any { return *t.Schedule }, want: Schedule{Cron: []string{"0 * * * *"}}},
		"cron list":               {in: "schedule:\n  cron: [\"0 * * * *\", \"30 1 * * mon\"]", get: func(t *Task) any { return *t.Schedule }, want: Schedule{Cron: []string{"0 * * * *", "30 1 * * mon"}}},
		"gpu integer":             {in: "resources:\n  gpu: 2", get: func(t *Task) any { return *t.Resources.GPU }, want: GPUSpec{Count: exactly(2)}},
		"gpu mapping":             {in: "resources:\n  gpu: {vendor: nvidia, name: [A100], memory: 40GB.., count: 2..8, total_memory: 160GB.., compute_capability: 8.0}", get: func(t *Task) any { return *t.Resources.GPU }, want: GPUSpec{Vendor: "nvidia", Names: []string{"A100"}, Memory: &ByteRange{Min: 40 * GB}, TotalMemory: &ByteRange{Min: 160 * GB}, ComputeCapability: "8.0", Count: IntRange{Min: 2, Max: ptr(8)}}},
		"cpu mapping":             {in: "resources:\n  cpu: {arch: x86, count: 4..}", get: func(t *Task) any { return *t.Resources.CPU }, want: CPUSpec{Arch: "x86", Count: IntRange{Min: 4}}},
		"default cpu":             {in: "name: ab", get: func(t *Task) any { return *t.Resources.CPU }, want: DefaultCPU},
		"memory plain number":     {in: "resources:\n  memory: 32", get: func(t *Task) any { return *t.Resources.Memory }, want: ByteRange{Min: 32 * GB, Max: ptr(32 * GB)}},
		"disk mapping":            {in: "resources:\n  disk: {size: 500GB..1TB}", get: func(t *Task) any { return *t.Resources.Disk }, want: ByteRange{Min: 500 * GB, Max: ptr(TB)}},
		"ports":                   {in: "ports: [8888, \"8080:80\", \"*:9000\"]", get: func(t *Task) any { return t.Ports }, want: []PortMapping{{8888, 8888}, {8080, 80}, {0, 9000}}},
		"volumes":                 {in: "volumes:\n  - /mnt/data:/data\n  - cache:/cache\n  - name: ds-${{ dstack.node_rank }}\n    path: /ds", get: func(t *Task) any { return t.Volumes }, want: []Volume{{InstancePath: "/mnt/data", Path: "/data"}, {Name: "cache", Path: "/cache"}, {Name: "ds-${{ dstack.node_rank }}", Path: "/ds"}}},
		"volumes read-only":       {in: "volumes:\n  - /mnt/data:/data:ro\n  - /mnt/out:/out:rw\n  - {instance_path: /m, path: /m, read_only: true}", get: func(t *Task) any { return t.Volumes }, want: []Volume{{InstancePath: "/mnt/data", Path: "/data", ReadOnly: true}, {InstancePath: "/mnt/out", Path: "/out"}, {InstancePath: "/m", Path: "/m", ReadOnly: true}}},
		"files":                   {in: "files:\n  - ../configs:~/configs\n  - data.csv\n  - {local_path: a, path: /b}", get: func(t *Task) any { return t.Files }, want: []FileMapping{{LocalPath: "../configs", Path: "~/configs"}, {LocalPath: "data.csv", Path: "data.csv"}, {LocalPath: "a", Path: "/b"}}},
		"repo dir":                {in: "repos: [\".:train\"]", get: func(t *Task) any { return t.Repos }, want: []Repo{{LocalPath: ".", Path: "train"}}},
		"repo url":                {in: "repos: [\"https://github.com/org/repo:/workflow\"]", get: func(t *Task) any { return t.Repos }, want: []Repo{{URL: "https://github.com/org/repo", Path: "/workflow"}}},
		"repo url port":           {in: "repos: [\"https://git.example.com:8443/org/repo.git:src\"]", get: func(t *Task) any { return t.Repos }, want: []Repo{{URL: "https://git.example.com:8443/org/repo.git", Path: "src"}}},
		"repo url port, no dir":   {in: "repos: [\"git://127.0.0.1:9418/repo.git\"]", get: func(t *Task) any { return t.Repos }, want: []Repo{{URL: "git://127.0.0.1:9418/repo.git"}}},
		"repo ssh url":            {in: "repos: [\"git@github.com:org/repo.git\"]", get: func(t *Task) any { return t.Repos }, want: []Repo{{URL: "git@github.com:org/repo.git"}}},
		"anchor and alias":        {in: "fleets: &f [a, b]\nregions: *f", get: func(t *Task) any { return t.Regions }, want: []string{"a", "b"}},
		"max price":               {in: "max_price: 2.5", get: func(t *Task) any { return *t.MaxPrice }, want: 2.5},
		"nodes":                   {in: "nodes: 4", get: func(t *Task) any { return t.Nodes }, want: 4},
		"default nodes":           {in: "name: ab", get: func(t *Task) any { return t.Nodes }, want: 1},
		"empty value is unset":    {in: "name:\nretry:", get: func(t *Task) any { return t.Name + "|" + boolStr(t.Retry == nil) }, want: "|true"},
		"single_branch false set": {in: "single_branch: false", get: func(t *Task) any { return *t.SingleBranch }, want: false},
		"tags":                    {in: "tags: {team: ml, cost: 1}", get: func(t *Task) any { return t.Tags }, want: map[string]string{"team": "ml", "cost": "1"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task, err := Parse("f.yml", []byte(base+tc.in+"\n"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, tc.get(task)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestParseFile(t *testing.T) {
	task, err := ParseFile("testdata/seeds/04-train.yml")
	if err != nil {
		t.Fatal(err)
	}
	if task.Name != "train" {
		t.Errorf("Name = %q, want train", task.Name)
	}
	_, err = ParseFile("testdata/does-not-exist.yml")
	if err == nil || errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "read configuration: ") {
		t.Errorf("missing file: err = %v, want a read error that is not ErrInvalid", err)
	}
}
