package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseWorkflowValues checks the decoded forms of array, depends_on,
// dependency_policy, singleton, kill_invalid_depend and groups.
func TestParseWorkflowValues(t *testing.T) {
	base := "type: task\ncommands: [x]\n"
	oneCPU := Resources{CPU: &CPUSpec{Count: exactly(1)}}
	tests := map[string]struct {
		in   string
		get  func(*Task) any
		want any
	}{
		"array integer":        {in: "array: 7", get: func(t *Task) any { return t.Array }, want: "7"},
		"array quoted":         {in: `array: "1-100%10"`, get: func(t *Task) any { return t.Array }, want: "1-100%10"},
		"array plain throttle": {in: "array: 1-100%10", get: func(t *Task) any { return t.Array }, want: "1-100%10"},
		"array step":           {in: "array: 0-15:4", get: func(t *Task) any { return t.Array }, want: "0-15:4"},
		"array list":           {in: "array: 1,3,5-7", get: func(t *Task) any { return t.Array }, want: "1,3,5-7"},
		"array trimmed":        {in: "array: ' 0-3 '", get: func(t *Task) any { return t.Array }, want: "0-3"},
		"depends_on forms": {
			in:  "depends_on:\n  - prep\n  - 42\n  - afterok: train\n  - {afterany: [ab, 7, b-c_3]}\n  - afternotok: 42_3\n  - aftercorr: [other]\n  - after: yz\narray: 0-3",
			get: func(t *Task) any { return t.DependsOn },
			want: []Dependency{
				{Type: "afterok", Runs: []string{"prep"}},
				{Type: "afterok", Runs: []string{"42"}},
				{Type: "afterok", Runs: []string{"train"}},
				{Type: "afterany", Runs: []string{"ab", "7", "b-c_3"}},
				{Type: "afternotok", Runs: []string{"42_3"}},
				{Type: "aftercorr", Runs: []string{"other"}},
				{Type: "after", Runs: []string{"yz"}},
			},
		},
		"policy and flags": {
			in:   "depends_on: [a-b]\ndependency_policy: any\nsingleton: true\nkill_invalid_depend: true",
			get:  func(t *Task) any { return []any{t.DependencyPolicy, t.Singleton, t.KillInvalidDepend} },
			want: []any{"any", true, true},
		},
		"groups": {
			in:  "groups:\n  - name: ps\n    resources: {cpu: 4}\n  - name: workers\n    nodes: 4\n    resources:\n      gpu: A100:8\n    commands: [torchrun train.py]\n  - {}",
			get: func(t *Task) any { return t.Groups },
			want: []Group{
				{Name: "ps", Nodes: 1, Resources: Resources{CPU: &CPUSpec{Count: exactly(4)}}},
				{Name: "workers", Nodes: 4, Resources: Resources{CPU: &CPUSpec{Count: exactly(1)}, GPU: &GPUSpec{Names: []string{"A100"}, Count: exactly(8)}}, Commands: []string{"torchrun train.py"}},
				{Nodes: 1, Resources: oneCPU},
			},
		},
		"groups leave the run's nodes and resources alone": {
			in:   "groups: [{name: a}]\nnodes: 1",
			get:  func(t *Task) any { return []any{t.Nodes, t.Resources} },
			want: []any{1, oneCPU},
		},
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

// TestParseWorkflowErrors pins the exact text and position of the
// problems of the workflow fields.
func TestParseWorkflowErrors(t *testing.T) {
	tests := map[string]struct {
		in   string
		want []string
	}{
		"array": {
			in: "type: task\ncommands: [x]\narray: 1-0\n",
			want: []string{
				"f.yml:3:8: array: range 1-0 is backwards (the start is after the end)",
			},
		},
		"array problems": {
			in: "type: task\ncommands: [x]\narray: 1-10%0\n",
			want: []string{
				"f.yml:3:8: array: throttle must be at least 1, got 0",
			},
		},
		"array type": {
			in:   "type: task\ncommands: [x]\narray: [1, 2]\n",
			want: []string{"f.yml:3:8: array: must be task indexes such as 0-15, 1,3,5-7, 0-15:4 or 1-100%10, not a list"},
		},
		"array empty": {
			in:   "type: task\ncommands: [x]\narray: ''\n",
			want: []string{"f.yml:3:8: array: empty: give task indexes such as 0-15, or remove `array`"},
		},
		"array too large": {
			in:   "type: task\ncommands: [x]\narray: 0-5000000\n",
			want: []string{"f.yml:3:8: array: index 5000000 is above the maximum 4000000"},
		},
		"depends_on not a list": {
			in:   "type: task\ncommands: [x]\ndepends_on: train\n",
			want: []string{"f.yml:3:13: depends_on: must be a list, not a string (e.g. [train])"},
		},
		"depends_on a mapping": {
			in:   "type: task\ncommands: [x]\ndepends_on:\n  afterok: train\n",
			want: []string{"f.yml:4:3: depends_on: must be a list, not a mapping (e.g. [{afterok: train}])"},
		},
		"depends_on items": {
			in: "type: task\ncommands: [x]\ndepends_on:\n" +
				"  - afterok: Train!\n" +
				"  - aftrok: x\n" +
				"  - {afterok: a, afterany: b}\n" +
				"  - afterok: []\n" +
				"  - afterok:42:43\n" +
				"  - singleton\n" +
				"  - afterany: [ab, {b: 1}, c_d]\n" +
				"  - aftercorr: other\n" +
				"  -\n" +
				"  - {}\n" +
				"dependency_policy: some\n",
			want: []string{
				`f.yml:4:14: depends_on[0].afterok: "Train!" is not a run: give a run name (train), a run ID (42) or one task of an array run (train_3, 42_3)`,
				`f.yml:5:5: depends_on[1].aftrok: unknown dependency type "aftrok"; did you mean "afterok"? (expected one of: after, afterany, afterok, afternotok, aftercorr)`,
				"f.yml:6:5: depends_on[2]: one condition per item, found 2 (afterok, afterany); give each its own `- ` item",
				"f.yml:7:14: depends_on[3].afterok: name at least one run",
				"f.yml:8:5: depends_on[4]: write Slurm's afterok:42:43 as a mapping: `- afterok: 42, 43`",
				"f.yml:9:5: depends_on[5]: `singleton` is a field of its own: write `singleton: true` at the top level",
				"f.yml:10:20: depends_on[6].afterany[1]: must be a run name or ID, not a mapping",
				"f.yml:11:16: depends_on[7].aftercorr: `aftercorr` starts each task of this array after the same task of the other: it needs `array:` on this run",
				"f.yml:12:4: depends_on[8]: empty item: name a run, or write a condition such as `afterok: train`",
				"f.yml:13:5: depends_on[9]: empty condition: write e.g. `afterok: train`",
				`f.yml:14:20: dependency_policy: unknown value "some" (expected one of: all, any)`,
			},
		},
		"bad run in a list": {
			in:   "type: task\ncommands: [x]\ndepends_on:\n  - afterany: [ab, c_d]\n",
			want: []string{`f.yml:4:20: depends_on[0].afterany[1]: "c_d" is not a run: give a run name (train), a run ID (42) or one task of an array run (train_3, 42_3)`},
		},
		"flags": {
			in: "type: task\ncommands: [x]\nsingleton: yes\nkill_invalid_depend: 1\n",
			want: []string{
				`f.yml:3:12: singleton: must be true or false, not "yes"`,
				`f.yml:4:22: kill_invalid_depend: must be true or false, not "1"`,
			},
		},
		"groups": {
			in: "type: task\nnodes: 2\nresources:\n  gpu: 1\ngroups:\n" +
				"  - name: ps\n    resources: {cpu: 4}\n    commands: [python ps.py]\n" +
				"  - name: ps\n    nodes: 0\n    gpu: 8\n    colour: red\n" +
				"  - name: Workers\n    nodes: 4\n    resources:\n      cpu: 0\n    commands: ['']\n" +
				"  - x\n",
			want: []string{
				"f.yml:2:8: nodes: each group has its own nodes and resources; move them into the groups",
				"f.yml:4:3: resources: each group has its own nodes and resources; move them into the groups",
				"f.yml:9:5: groups[1].commands: required: give `commands` to this group or to the run, or an `image` whose entrypoint does the work",
				`f.yml:9:11: groups[1].name: "ps" is also the name of groups[0]`,
				"f.yml:10:12: groups[1].nodes: must be at least 1, got 0",
				`f.yml:11:5: groups[1].gpu: unknown field; did you mean "resources.gpu"? (indent it under ` + "`resources:`)",
				"f.yml:12:5: groups[1].colour: unknown field",
				`f.yml:13:11: groups[2].name: "Workers" is not a valid group name: use up to 41 lowercase letters, digits and hyphens, starting with a letter`,
				`f.yml:16:12: groups[2].resources.cpu: CPU spec "0": a node needs at least one CPU`,
				"f.yml:17:16: groups[2].commands[0]: empty command",
				"f.yml:18:5: groups[3]: must be a mapping of fields, not a string",
			},
		},
		"groups with array": {
			in:   "type: task\ncommands: [x]\narray: 0-3\ngroups: [{name: a}]\n",
			want: []string{"f.yml:3:8: array: a heterogeneous run (`groups`) cannot be a job array, as in Slurm: drop `array` or `groups`"},
		},
		"array references": {
			in: "type: task\nname: x-${{ array.idx }}\ncommands:\n  - echo ${{ array.index }} ${{array.index}}\nenv:\n  - N=${{ array.count }}\n  - T=${{ secrets.token }}\n",
			want: []string{
				`f.yml:2:7: name: unknown reference ${{ array.idx }}; did you mean "array.index"? (expected ${{ array.index }} or ${{ array.count }})`,
				"f.yml:4:5: commands[0]: ${{ array.index }} needs `array:`: it is set for each task of a job array",
				"f.yml:6:5: env[0]: ${{ array.count }} needs `array:`: it is set for each task of a job array",
			},
		},
		"array name too long": {
			in:   "type: task\nname: a-very-long-name-for-a-sweep-abcdefgh-${{ array.index }}\narray: 0-1000\ncommands: [x]\n",
			want: []string{`f.yml:2:7: name: "a-very-long-name-for-a-sweep-abcdefgh-${{ array.index }}" is not a valid run name for the tasks of this array (it gives "a-very-long-name-for-a-sweep-abcdefgh-1000"): use 2 to 41 lowercase letters, digits and hyphens, starting with a letter`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			task, err := Parse("f.yml", []byte(tc.in))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want errors", task)
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateWorkflow: the same rules hold for a Task built in code or
// decoded from JSON, as the server receives it (normalized: the default
// CPU request is not "resources set").
func TestValidateWorkflow(t *testing.T) {
	valid := func() *Task {
		task := &Task{Type: "task", Commands: []string{"echo"}}
		task.Normalize()
		return task
	}
	tests := map[string]struct {
		mutate func(*Task)
		want   []string
	}{
		"array and dependencies": {mutate: func(t *Task) {
			t.Name, t.Array = "sweep-${{ array.index }}", "0-99%10"
			t.DependsOn = []Dependency{{Type: "afterok", Runs: []string{"prep", "42", "7_1"}}, {Type: "aftercorr", Runs: []string{"gen"}, IDs: []int64{9}}}
			t.DependencyPolicy = "any"
		}},
		"groups after Normalize": {mutate: func(t *Task) {
			t.Groups = []Group{{Name: "a", Commands: []string{"x"}}, {Name: "b", Nodes: 2}}
			t.Normalize()
		}},
		"groups carry the commands": {mutate: func(t *Task) {
			t.Commands, t.Groups = nil, []Group{{Commands: []string{"x"}}, {Commands: []string{"y"}}}
		}},
		"bad array":    {mutate: func(t *Task) { t.Array = "1-7:0" }, want: []string{"array: step must be at least 1, got 0"}},
		"unknown type": {mutate: func(t *Task) { t.DependsOn = []Dependency{{Type: "afterok"}, {Type: "aftreok", Runs: []string{"x"}}} }, want: []string{"depends_on[0].afterok: name at least one run", `depends_on[1]: unknown dependency type "aftreok"; did you mean "afterok"? (expected one of: after, afterany, afterok, afternotok, aftercorr)`}},
		"bad refs": {mutate: func(t *Task) {
			t.DependsOn = []Dependency{{Type: "after", Runs: []string{"ab", "A", "1_", "x_1_2", "-1", "ab_12345678"}}}
		}, want: badRuns("depends_on[0].after", 1, "A", 2, "1_", 3, "x_1_2", 4, "-1", 5, "ab_12345678")},
		"aftercorr":        {mutate: func(t *Task) { t.DependsOn = []Dependency{{Type: "aftercorr", Runs: []string{"ab"}}} }, want: []string{"depends_on[0].aftercorr: `aftercorr` starts each task of this array after the same task of the other: it needs `array:` on this run"}},
		"policy":           {mutate: func(t *Task) { t.DependencyPolicy = "al" }, want: []string{`dependency_policy: unknown value "al"; did you mean "all"? (expected one of: all, any)`}},
		"groups and nodes": {mutate: func(t *Task) { t.Nodes, t.Groups = 3, []Group{{}} }, want: []string{"nodes: each group has its own nodes and resources; move them into the groups"}},
		"groups and gpu": {
			mutate: func(t *Task) { t.Resources.GPU, t.Groups = &GPUSpec{Count: exactly(1)}, []Group{{Nodes: -1}} },
			want:   []string{"resources: each group has its own nodes and resources; move them into the groups", "groups[0].nodes: must be at least 1, got -1"},
		},
		"groups without commands": {
			mutate: func(t *Task) { t.Commands, t.Groups = nil, []Group{{Commands: []string{"x"}}, {Name: "b"}} },
			want:   []string{"groups[1].commands: required: give `commands` to this group or to the run, or an `image` whose entrypoint does the work"},
		},
		"refs without array": {
			mutate: func(t *Task) { t.Groups = []Group{{Commands: []string{"echo ${{ array.index }} $${{ array.nope }}"}}} },
			want:   []string{"groups[0].commands[0]: ${{ array.index }} needs `array:`: it is set for each task of a job array"},
		},
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
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// badRuns builds the expected messages for run references at list
// positions: badRuns(path, 1, "A", ...) is path[1] naming "A".
func badRuns(path string, pairs ...any) []string {
	var out []string
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, index(path, pairs[i].(int))+": "+jsonQuote(pairs[i+1].(string))+" is not a run: give a run name (train), a run ID (42) or one task of an array run (train_3, 42_3)")
	}
	return out
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestWorkflowSetFields(t *testing.T) {
	src := "type: task\ncommands: [x]\nexclusive: true\narray: 0-3\ndepends_on: [ab]\ndependency_policy: all\nsingleton: true\nkill_invalid_depend: true\nmax_duration: 1h\n"
	task, err := Parse("f.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"commands", "exclusive", "array", "depends_on", "dependency_policy", "singleton", "kill_invalid_depend", "max_duration"}
	if diff := cmp.Diff(want, task.SetFields()); diff != "" {
		t.Errorf("SetFields mismatch (-want +got):\n%s", diff)
	}
	task, err = Parse("f.yml", []byte("type: task\ngroups: [{commands: [x], resources: {gpu: 1}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"groups"}, task.SetFields()); diff != "" {
		t.Errorf("SetFields with groups mismatch (-want +got):\n%s", diff)
	}
}

func TestForArrayTask(t *testing.T) {
	src := "type: task\n" +
		"name: sweep-${{ array.index }}\n" +
		"array: 0-15:4%2\n" +
		"env:\n  - SHARD=${{array.index}}/${{ array.count }}\n  - TOKEN=${{ secrets.hf }}\n  - PASS\n" +
		"commands:\n  - python train.py --shard ${{  array.index  }} --of ${{ array.count }}\n  - echo $${{ array.index }} ${{ dstack.node_rank }}\n" +
		"depends_on: [{afterok: [prep, 42]}]\n"
	task, err := Parse("f.yml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(task)
	got := task.ForArrayTask(8, 4)
	want := *task
	want.Name = "sweep-8"
	want.Array = ""
	want.Env = Env{{Name: "SHARD", Value: "8/4"}, {Name: "TOKEN", Value: "${{ secrets.hf }}"}, {Name: "PASS", PassThrough: true}}
	want.Commands = []string{"python train.py --shard 8 --of 4", "echo $${{ array.index }} ${{ dstack.node_rank }}"}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("ForArrayTask mismatch (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the task of an array does not validate: %v", err)
	}
	// The copy shares nothing the server may change with the original.
	got.Commands[0], got.Env[0].Value = "changed", "changed"
	got.DependsOn[0].Runs[0] = "changed"
	got.DependsOn[0].IDs = append(got.DependsOn[0].IDs, 7)
	after, _ := json.Marshal(task)
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("changing the copy changed the original (-before +after):\n%s", diff)
	}

	hetero := &Task{Commands: []string{"a"}, Groups: []Group{{Name: "g", Commands: []string{"run ${{ array.count }}"}}, {Name: "h"}}}
	g := hetero.ForArrayTask(1, 2)
	if diff := cmp.Diff([]Group{{Name: "g", Commands: []string{"run 2"}}, {Name: "h"}}, g.Groups); diff != "" {
		t.Errorf("groups mismatch (-want +got):\n%s", diff)
	}
	if hetero.Groups[0].Commands[0] != "run ${{ array.count }}" {
		t.Errorf("ForArrayTask changed the original's groups")
	}
}

func TestExpandRefs(t *testing.T) {
	vars := map[string]string{"array.index": "3", "array.count": "10"}
	tests := map[string]struct {
		in, want, wantErr string
	}{
		"none":             {in: "python train.py", want: "python train.py"},
		"spacing":          {in: "${{array.index}} ${{ array.index }} ${{   array.count\t}}", want: "3 3 10"},
		"adjacent":         {in: "a${{ array.index }}${{ array.count }}b", want: "a310b"},
		"other namespaces": {in: "${{ secrets.x }} ${{ run.name }} ${{ array.index }}", want: "${{ secrets.x }} ${{ run.name }} 3"},
		"escaped":          {in: "$${{ array.index }} ${{ array.index }}", want: "$${{ array.index }} 3"},
		"unclosed":         {in: "x ${{ array.index", want: "x ${{ array.index"},
		"unknown":          {in: "${{ array.idx }} ${{ array.index }}", want: "${{ array.idx }} 3", wantErr: `unknown reference ${{ array.idx }}; did you mean "array.index"? (known: array.count, array.index)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ExpandRefs(tc.in, vars)
			if got != tc.want {
				t.Errorf("ExpandRefs(%q) = %q, want %q", tc.in, got, tc.want)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error = %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}

func TestTaskArraySpec(t *testing.T) {
	task := &Task{}
	if a, err := task.ArraySpec(); a != nil || err != nil {
		t.Errorf("no array: %v, %v", a, err)
	}
	task.Array = "1-100%10"
	a, err := task.ArraySpec()
	if err != nil || a.Count() != 100 || a.Throttle != 10 {
		t.Errorf("ArraySpec() = %v, %v", a, err)
	}
}
