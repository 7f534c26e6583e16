//go:build linux

package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/spec"
)

// corpusDirs are where the configurations of the corpus test come from:
// Berth's own docs, and the seed documents of the project when this
// machine has them (they are not part of the repository).
var corpusDirs = []string{"../../docs", "../../README.md", "/work/shared/seeds"}

// fenceRE finds fenced YAML blocks, indented or not (the seeds indent
// those inside tabs).
var fenceRE = regexp.MustCompile("(?ms)^([ \t]*)```ya?ml[^\n]*\n(.*?)^[ \t]*```")

type corpusConfig struct {
	where, text, typ string
}

// corpus is every YAML block of the documents that is a configuration (a
// `type:` at its top level).
func corpus(t *testing.T) []corpusConfig {
	var files []string
	for _, d := range corpusDirs {
		if strings.HasSuffix(d, ".md") {
			files = append(files, d)
			continue
		}
		m, _ := filepath.Glob(filepath.Join(d, "*.md"))
		if len(m) == 0 {
			t.Logf("corpus: no documents in %s (skipped)", d)
		}
		files = append(files, m...)
	}
	typeRE := regexp.MustCompile(`(?m)^type:\s*(\S+)`)
	var out []corpusConfig
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenceRE.FindAllSubmatchIndex(b, -1) {
			indent := string(b[m[2]:m[3]])
			var lines []string
			for _, l := range strings.Split(string(b[m[4]:m[5]]), "\n") {
				lines = append(lines, strings.TrimPrefix(l, indent))
			}
			text := strings.Join(lines, "\n")
			tm := typeRE.FindStringSubmatch(text)
			if tm == nil {
				continue // a fragment of one, not a configuration
			}
			line := strings.Count(string(b[:m[0]]), "\n") + 1
			out = append(out, corpusConfig{where: fmt.Sprintf("%s:%d", filepath.Base(f), line), text: text, typ: tm[1]})
		}
	}
	return out
}

// knownRefusals are the refusals of corpus configurations that are right
// or known gaps, by a part of the message: any other refusal fails the
// test.
var knownRefusals = []struct{ match, why string }{
	{"is empty: indent this line under it", "the document's own YAML is mis-indented (its `resources:` is left empty and its sub-fields land at the top)"},
	{"mounts a network volume only when the volume is active", "a network volume in a run with `image:` that this cluster has not made (the configuration names a volume of its own)"},
	{"is not supported by Berth yet", "a volume per node (`${{ dstack.node_rank }}`; a gap of Berth's)"},
}

func knownRefusal(msg string) string {
	for _, k := range knownRefusals {
		if strings.Contains(msg, k.match) {
			return k.why
		}
	}
	return ""
}

// whyNotHere says what a configuration needs that this machine (one CPU
// node, no GPU, no registry, no cloud) lacks, or "" when it can run here.
func whyNotHere(tk *spec.Task) string {
	switch {
	case tk.Resources.GPU != nil && tk.Resources.GPU.Count.Min > 0:
		return "needs a GPU"
	case tk.Image != "":
		return "needs the image " + tk.Image + " from a registry"
	case tk.Nodes > 1:
		return "needs several nodes"
	case len(tk.Backends)+len(tk.Regions)+len(tk.InstanceTypes) > 0:
		return "needs a cloud"
	case tk.Schedule != nil:
		return "runs on a schedule"
	case tk.Nvcc:
		return "needs nvcc"
	case slices.ContainsFunc(tk.Volumes, spec.Volume.IsNetwork):
		return "mounts a network volume (made by a `type: volume` and a backend fleet)"
	case len(tk.Volumes) > 0:
		return "mounts directories of the reader's machine"
	}
	for _, r := range tk.URLRepos() {
		if !strings.HasPrefix(r.URL, "file://") {
			return "clones " + r.URL + " (no internet here)"
		}
	}
	if v := tk.Python; v != "" {
		if _, err := exec.LookPath("python" + v); err != nil {
			return "needs python" + v + ", not installed here"
		}
	}
	for _, c := range tk.Commands {
		for _, w := range strings.Fields(c) {
			if strings.HasSuffix(w, ".py") || strings.HasSuffix(w, ".sh") {
				return "needs " + w + ", which the example does not include"
			}
		}
		if f := strings.Fields(c); len(f) > 0 {
			if _, err := exec.LookPath(f[0]); err != nil {
				return "needs " + f[0] + ", not installed here"
			}
			if f[0] == "pip" || f[0] == "pip3" {
				return "installs packages from PyPI (no internet here)"
			}
		}
	}
	return ""
}

// The corpus: every task configuration in Berth's docs and the project's
// seed documents validates (berth apply --dry-run against a server), and
// each that needs nothing this machine lacks runs to exit 0. What is
// skipped is logged with the reason.
func TestCorpusConfigurations(t *testing.T) {
	t.Parallel()
	cs := corpus(t)
	if len(cs) == 0 {
		t.Fatal("no configurations found in the docs")
	}
	c := newCluster(t)
	c.startServer("--agent-name", "corpus-node", "--cpus", "2")
	c.waitNodes(30*time.Second, "corpus-node")
	ran := 0
	for i, cc := range cs {
		if cc.typ == "volume" {
			if _, err := spec.ParseVolume(cc.where, []byte(cc.text)); err != nil {
				t.Errorf("%s: does not validate: %v", cc.where, err)
			} else {
				t.Logf("%s: a volume: validates", cc.where)
			}
			continue
		}
		if cc.typ != "task" {
			t.Logf("%s: type %s: not a task (skipped: other configuration types are other work of issue 16)", cc.where, cc.typ)
			continue
		}
		// Each in a Git repository of its own, for `repos: [.]`.
		dir := filepath.Join(c.home, fmt.Sprintf("corpus-%d", i))
		gitRepo(t, dir, map[string]string{"README": cc.where + "\n"})
		conf := filepath.Join(dir, ".dstack.yml")
		if err := os.WriteFile(conf, []byte(cc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := spec.Parse(conf, []byte(cc.text))
		if err != nil {
			if why := knownRefusal(err.Error()); why != "" {
				t.Logf("%s: refused, as expected: %s", cc.where, why)
				continue
			}
			t.Errorf("%s: does not validate: %v", cc.where, err)
			continue
		}
		// The local files it carries are the reader's: make them (but
		// in the reader's home, which is not the test's to write).
		home := ""
		for _, f := range tk.Files {
			if strings.HasPrefix(f.LocalPath, "~") {
				home = f.LocalPath
				continue
			}
			p := filepath.Join(dir, f.LocalPath)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("made by the corpus test\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// Secrets it names are the project's: give each a value.
		for _, ref := range tk.SecretRefs() {
			c.mustBerth("secret", "set", ref.Name, "corpus-value")
		}
		if r := c.berth("", "apply", "--dry-run", "-f", conf); r.code != 0 {
			if home != "" && strings.Contains(r.stderr, "no such file or directory") {
				t.Logf("%s: validates; not run: carries the reader's own %s", cc.where, home)
				continue
			}
			if why := knownRefusal(r.stderr); why != "" {
				t.Logf("%s: refused, as expected: %s", cc.where, why)
				continue
			}
			t.Errorf("%s: apply --dry-run: %s", cc.where, r)
			continue
		}
		if why := whyNotHere(tk); why != "" {
			t.Logf("%s: validates; not run: %s", cc.where, why)
			continue
		}
		if r := c.berth("", "apply", "-y", "-f", conf); r.code != 0 {
			t.Errorf("%s: apply: %s", cc.where, r)
			continue
		}
		ran++
		t.Logf("%s: validates and runs", cc.where)
	}
	if ran == 0 {
		t.Error("no configuration of the corpus ran")
	}
}
