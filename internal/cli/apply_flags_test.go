package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// Without -f, apply reads .dstack.yml, then .dstack.yaml, .berth.yml and
// .berth.yaml; with none, it says which it looked for.
func TestDefaultConfig(t *testing.T) {
	dir := t.TempDir()
	if _, err := defaultConfig(dir); err == nil || !strings.Contains(err.Error(), ".dstack.yml, .dstack.yaml, .berth.yml, .berth.yaml") {
		t.Errorf("no configuration: %v", err)
	}
	for _, name := range []string{".berth.yaml", ".berth.yml", ".dstack.yaml", ".dstack.yml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("type: task\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := defaultConfig(dir); err != nil || got != name {
			t.Errorf("with %s present: %q, %v", name, got, err)
		}
	}
}

func TestApplyOverrides(t *testing.T) {
	base := func() *spec.Task {
		tk, err := spec.Parse("a.yml", []byte("type: task\nname: aa\ncommands: [x]\nretry: {on_events: [error]}\nfleets: [f1]\nenv: [KEEP=1]\n"))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	lookup := func(k string) (string, bool) {
		if k == "LOCAL" {
			return "from-shell", true
		}
		return "", false
	}
	parse := func(args ...string) (*spec.Task, error) {
		var o applyOverrides
		fs := pflag.NewFlagSet("apply", pflag.ContinueOnError)
		o.register(fs)
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		tk := base()
		return tk, o.apply(tk, lookup)
	}
	tk, err := parse("--gpu", "A100:2", "--cpu", "8", "--memory", "64GB..", "--disk", "100GB..", "--max-duration", "2h",
		"--fleet", "a", "--fleet", "b", "--max-price", "1.5", "--retry-duration", "1h", "-n", "bb", "-e", "LOCAL", "-e", "KEEP=2", "--spot")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{tk.Name, tk.Resources.String(), tk.MaxDuration.String(), strings.Join(tk.Fleets, ","), tk.Retry.Duration.String(),
		strings.Join(tk.Retry.OnEvents, ","), strings.Join(tk.Env.Strings(), " "), tk.SpotPolicy}
	want := []string{"bb", "", "2h", "a,b", "1h", "no-capacity,error,interruption", "KEEP=2 LOCAL=from-shell", "spot"}
	for i := range want {
		if i == 1 {
			for _, part := range []string{"A100", "8", "64GB", "100GB"} {
				if !strings.Contains(got[1], part) {
					t.Errorf("resources %q lack %s", got[1], part)
				}
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("override %d: %q, want %q", i, got[i], want[i])
		}
	}
	if tk.MaxPrice == nil || *tk.MaxPrice != 1.5 {
		t.Errorf("max price %v", tk.MaxPrice)
	}
	if tk, err := parse("--max-duration", "off", "--no-retry"); err != nil || tk.MaxDuration != nil || tk.Retry != nil {
		t.Errorf("off and --no-retry: %v, %v", tk, err)
	}
	for args, want := range map[string]string{
		"-e NOPE":                     "NOPE is not set",
		"--gpu A100:x":                "--gpu: ",
		"--retry --no-retry":          "give one of them",
		"--spot --on-demand":          "give one of them",
		"--max-duration soon":         "--max-duration: ",
		"--retry --retry-duration 1h": "give one of them",
	} {
		if _, err := parse(strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

func TestSpecDiff(t *testing.T) {
	parse := func(y string) *spec.Task {
		tk, err := spec.Parse("a.yml", []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	old := parse("type: task\nname: aa\ncommands: [x]\n")
	old.QOS = "normal" // the server's default
	if d := specDiff(old, parse("type: task\nname: aa\ncommands: [x]\n")); d != "" {
		t.Errorf("the same configuration: %q", d)
	}
	if d := specDiff(old, parse("type: task\nname: aa\ncommands: [y]\nmax_duration: 1h\n")); d != "  commands: [\"x\"] -> [\"y\"]\n  max_duration: - -> 3600\n" {
		t.Errorf("changes: %q", d)
	}
}

// A container engine's long error is said once, below the fleet table,
// with the nodes that gave it; the rows say "none (below)".
func TestFleetEngineErrorOnce(t *testing.T) {
	e := "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running? " + strings.Repeat("x", 150)
	node := func(name, engine string) api.Node {
		return api.Node{NodeInfo: api.NodeInfo{Name: name, Containers: engine}}
	}
	nodes := []api.Node{node("n1", "none ("+e+")"), node("n2", "none ("+e+")"), node("n3", "docker 1.41")}
	var b strings.Builder
	if err := printFleet(&b, nodes, palette{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, e); n != 1 {
		t.Errorf("the engine's error appears %d times:\n%s", n, out)
	}
	if !strings.Contains(out, "No container engine on n1, n2: "+e+"\n") || strings.Count(out, "none (below)") != 2 {
		t.Errorf("fleet:\n%s", out)
	}
	if nodes[0].Containers != "none ("+e+")" {
		t.Errorf("printFleet changed its caller's nodes")
	}
}
