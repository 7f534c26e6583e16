package policy

import (
	"strings"
	"testing"

	"github.com/berth-hq/berth/internal/sched"
)

func TestBillingWeights(t *testing.T) {
	tests := map[string]struct {
		text  string
		alloc Alloc
		want  float64
	}{
		"unset bills CPUs":         {"", Alloc{CPUs: 4, Memory: 8 << 30, GPUs: 1}, 4},
		"cpu and gpu":              {"CPU=1.0,GRES/gpu=2.0", Alloc{CPUs: 4, GPUs: 2}, 8},
		"memory per GB":            {"Mem=0.25G", Alloc{Memory: 8 << 30}, 2},
		"memory per MB, no suffix": {"Mem=0.5", Alloc{Memory: 4 << 20}, 2},
		"a typed GPU counts twice": {"GRES/gpu=1,GRES/gpu:a100=4", Alloc{GPUs: 2, GPUTypes: map[string]int{"a100": 2, "nvidia": 2}}, 10},
		"case and spaces as Slurm": {"cpu=0.5, gres/GPU:A100=3", Alloc{CPUs: 2, GPUs: 1, GPUTypes: map[string]int{"a100": 1}}, 4},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var w *BillingWeights
			if tc.text != "" {
				var err error
				if w, err = ParseBillingWeights(tc.text); err != nil {
					t.Fatal(err)
				}
			}
			if got := w.Billing(tc.alloc); got != tc.want {
				t.Errorf("billing = %v, want %v", got, tc.want)
			}
		})
	}
}

// The policy file: billing weights by default and per fleet, private
// data, a user's limits within a project and the project's user_limits;
// bad values are refused with the file, line and field.
func TestAccountingSettings(t *testing.T) {
	p, err := Parse("p.yml", []byte(`
billing_weights: "CPU=1.0,Mem=0.25G"
private_data: [jobs]
projects:
  ml:
    user_limits: {jobs: 2}
    users:
      ann: {limits: {submit: 10, gpu: 1}}
fleets:
  gpu: {billing_weights: "CPU=1,GRES/gpu=8"}
  cpu: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.BillingFor("gpu").Billing(Alloc{CPUs: 2, GPUs: 1}); got != 10 {
		t.Errorf("gpu fleet bills %v, want 10", got)
	}
	if got := p.BillingFor("cpu").Billing(Alloc{CPUs: 2, Memory: 4 << 30}); got != 3 {
		t.Errorf("cpu fleet (the default weights) bills %v, want 3", got)
	}
	if p.PrivateData == nil || !p.PrivateData.Jobs || p.PrivateData.Logs {
		t.Errorf("private data = %+v", p.PrivateData)
	}
	if l := p.Limits[sched.ProjectUserKey("ml", "ann")]; l.TRES.GPUs != 1 || p.Submit[sched.ProjectUserKey("ml", "ann")] != 10 {
		t.Errorf("ann in ml: %+v, submit %d", l, p.Submit[sched.ProjectUserKey("ml", "ann")])
	}
	if l, ok := sched.LimitOf(p.Limits, sched.ProjectUserKey("ml", "bob")); !ok || l.Jobs != 2 {
		t.Errorf("bob in ml: %+v %v, want the project's user_limits", l, ok)
	}
	if q, _ := Parse("q.yml", nil); q.PrivateData != nil {
		t.Error("a file that says nothing of private data set it")
	}
	for text, want := range map[string]string{
		"billing_weights: \"CPU=x\"\n":                    `b.yml:1:18: billing_weights: "CPU=x": the weight must be a number`,
		"fleets:\n  g: {billing_weights: \"node=1\"}\n":   `b.yml:2:24: fleets.g.billing_weights: "node=1": Berth bills CPU, Mem, GRES/gpu and GRES/gpu:TYPE`,
		"private_data: [jobs, usage]\n":                   `b.yml:1:22: private_data[1]: want jobs, logs or none, got "usage"`,
		"projects:\n  ml:\n    user_limits: {jobs: -1}\n": `b.yml:3:25: projects.ml.user_limits.jobs: must be 0`,
	} {
		_, err := Parse("b.yml", []byte(text))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %s…", text, err, want)
		}
	}
}
