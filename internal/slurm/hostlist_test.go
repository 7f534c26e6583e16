package slurm

import (
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/quick"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The expectations below are what `scontrol show hostnames|hostlist` of
// Slurm 22.05.8 printed for the same input.
func TestExpandHostlist(t *testing.T) {
	tests := map[string]struct {
		expr string
		want []string
	}{
		"brackets and plain":  {"node[01-03,10],gpu-a[1-2]", []string{"node01", "node02", "node03", "node10", "gpu-a1", "gpu-a2"}},
		"single":              {"localhost", []string{"localhost"}},
		"empty":               {"", nil},
		"order and dups kept": {"n3,n1,n2,n1", []string{"n3", "n1", "n2", "n1"}},
		"padding from lower":  {"n[1-010]", []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"}},
		"padded range":        {"a[098-100]", []string{"a098", "a099", "a100"}},
		"two dimensions":      {"x[1-3]y[1-2]", []string{"x1y1", "x1y2", "x2y1", "x2y2", "x3y1", "x3y2"}},
		"dash is a name":      {"n1-3", []string{"n1-3"}},
		"overlap kept":        {"n[1-3,2-4]", []string{"n1", "n2", "n3", "n2", "n3", "n4"}},
		"numbers only":        {"1,2,3", []string{"1", "2", "3"}},
		"spaces separate":     {"a1 a2\tb", []string{"a1", "a2", "b"}},
		"dot in prefix":       {"a.[1-2]", []string{"a.1", "a.2"}},
		"open range is one":   {"n[5-]", []string{"n5"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ExpandHostlist(tc.expr)
			if err != nil {
				t.Fatalf("ExpandHostlist(%q): %v", tc.expr, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ExpandHostlist(%q) (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

func TestExpandHostlistErrors(t *testing.T) {
	tests := map[string]struct{ expr, msg string }{
		"reversed":       {"n[5-1]", "Invalid range: `5-1'"},
		"letters":        {"n[a-b]", "Invalid range: `a-b'"},
		"suffix":         {"n[1-3],n[5-6]x", "text after `]' in `n[5-6]x'"},
		"unbalanced":     {"n[1-3", "unbalanced `['"},
		"empty item":     {"n[1,,2]", "Invalid range: `'"},
		"negative":       {"n[1--2]", "Invalid range: `1--2'"},
		"too many":       {"n[0-70000]", "Too many hosts in range `0-70000'"},
		"box":            {"n[1x2]", "Invalid range: `1x2'"},
		"cartesian bomb": {"a[0-65535]b[0-65535]", "too many hosts"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ExpandHostlist(tc.expr)
			var he *HostlistError
			if !errors.As(err, &he) || !errors.Is(err, ErrHostlist) {
				t.Fatalf("ExpandHostlist(%q) = %v, want a *HostlistError", tc.expr, err)
			}
			if he.Msg != tc.msg {
				t.Errorf("ExpandHostlist(%q) message %q, want %q", tc.expr, he.Msg, tc.msg)
			}
		})
	}
}

func TestCompressHostlist(t *testing.T) {
	tests := map[string]struct {
		hosts []string
		want  string
	}{
		"range":            {[]string{"n3", "n1", "n2", "n1"}, "n[1-3]"},
		"two prefixes":     {[]string{"node01", "node02", "node10", "node9", "gpu-a1", "gpu-a2"}, "gpu-a[1-2],node[9,01-02,10]"},
		"widths":           {[]string{"a1", "a01", "a001"}, "a[1,01,001]"},
		"unpadded growth":  {[]string{"a9", "a10", "a11"}, "a[9-11]"},
		"padded growth":    {[]string{"a098", "a099", "a100"}, "a[098-100]"},
		"natural prefixes": {[]string{"rack10-n1", "rack2-n1", "rack2-n2"}, "rack2-n[1-2],rack10-n1"},
		"plain names":      {[]string{"c", "a", "b", "a"}, "a,b,c"},
		"one":              {[]string{"localhost"}, "localhost"},
		"none":             {nil, ""},
		"zero":             {[]string{"n1", "n0"}, "n[0-1]"},
		"numbers":          {[]string{"3", "1", "2"}, "[1-3]"},
		"name and numbers": {[]string{"n", "n1", "n2"}, "n,n[1-2]"},
		"gap":              {[]string{"n1", "n2", "m1", "n3", "n5"}, "m1,n[1-3,5]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := CompressHostlist(tc.hosts); got != tc.want {
				t.Errorf("CompressHostlist(%q) = %q, want %q", tc.hosts, got, tc.want)
			}
		})
	}
}

func TestRangedHostlist(t *testing.T) {
	tests := map[string]struct {
		hosts []string
		want  string
	}{
		"keeps order":  {[]string{"n3", "n1", "n2"}, "n[3,1-2]"},
		"keeps dups":   {[]string{"n1", "n2", "n3", "n1"}, "n[1-3,1]"},
		"interleaved":  {[]string{"n1", "n2", "m1", "n3"}, "n[1-2],m1,n3"},
		"two prefixes": {[]string{"node01", "node02", "node10", "node9", "gpu-a1", "gpu-a2"}, "node[01-02,10,9],gpu-a[1-2]"},
		"dotted":       {[]string{"a.1", "a.2"}, "a.[1-2]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RangedHostlist(tc.hosts); got != tc.want {
				t.Errorf("RangedHostlist(%q) = %q, want %q", tc.hosts, got, tc.want)
			}
		})
	}
}

func TestHostlistCount(t *testing.T) {
	n, err := HostlistCount("n[1-4],gpu[01-10],login")
	if err != nil || n != 15 {
		t.Fatalf("HostlistCount = %d, %v; want 15", n, err)
	}
}

// hostSet is a generator of host names for the property tests: a few
// prefixes, each with its own zero padding, so that Slurm's order is plain
// (prefix, number).
type hostSet []string

func (hostSet) Generate(r *rand.Rand, size int) reflect.Value {
	prefixes := []string{"n", "node", "gpu-a", "rack1-n", "rack10-n", "x.y"}
	widths := map[string]int{}
	for _, p := range prefixes {
		widths[p] = r.Intn(4)
	}
	k := r.Intn(size + 1)
	hs := make(hostSet, 0, k)
	for i := 0; i < k; i++ {
		p := prefixes[r.Intn(len(prefixes))]
		n := r.Intn(40)
		if r.Intn(10) == 0 {
			n = r.Intn(2000)
		}
		hs = append(hs, formatHost(p, uint64(n), widths[p]))
		if r.Intn(20) == 0 {
			hs = append(hs, "login") // a host without a number
		}
	}
	return reflect.ValueOf(hs)
}

func sortUniqueHosts(hs []string) []string {
	type key struct {
		prefix string
		num    int
		host   string
	}
	seen := map[string]bool{}
	var ks []key
	for _, h := range hs {
		if seen[h] {
			continue
		}
		seen[h] = true
		r := parseHost(h)
		num := -1
		if !r.single {
			num = int(r.lo)
		}
		ks = append(ks, key{r.prefix, num, h})
	}
	sort.Slice(ks, func(i, j int) bool {
		if c := natCompare(ks[i].prefix, ks[j].prefix); c != 0 {
			return c < 0
		}
		return ks[i].num < ks[j].num
	})
	var out []string
	for _, k := range ks {
		out = append(out, k.host)
	}
	return out
}

func TestCompressExpandProperty(t *testing.T) {
	prop := func(hs hostSet) bool {
		got, err := ExpandHostlist(CompressHostlist(hs))
		if err != nil {
			t.Logf("expand: %v", err)
			return false
		}
		if diff := cmp.Diff(sortUniqueHosts(hs), got); diff != "" {
			t.Logf("hosts %q (-want +got):\n%s", []string(hs), diff)
			return false
		}
		ordered, err := ExpandHostlist(RangedHostlist(hs))
		if err != nil || !cmp.Equal([]string(hs), ordered, cmpopts.EquateEmpty()) {
			t.Logf("ranged %q -> %q", []string(hs), ordered)
			return false
		}
		return true
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 400}); err != nil {
		t.Error(err)
	}
}

// Any widths at all: compression keeps the set and is idempotent.
func TestCompressAnyWidths(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 500; i++ {
		var hs []string
		for k := r.Intn(12); k > 0; k-- {
			hs = append(hs, formatHost("a", uint64(r.Intn(120)), r.Intn(4)))
		}
		c := CompressHostlist(hs)
		got, err := ExpandHostlist(c)
		if err != nil {
			t.Fatalf("%q: %v", c, err)
		}
		want := map[string]bool{}
		for _, h := range hs {
			want[h] = true
		}
		gotSet := map[string]bool{}
		for _, h := range got {
			if gotSet[h] {
				t.Fatalf("CompressHostlist(%q) = %q names %s twice", hs, c, h)
			}
			gotSet[h] = true
		}
		if !cmp.Equal(want, gotSet) {
			t.Fatalf("CompressHostlist(%q) = %q, expands to %q", hs, c, got)
		}
		if again := CompressHostlist(got); again != c {
			t.Fatalf("not idempotent: %q then %q", c, again)
		}
	}
}

func FuzzExpandHostlist(f *testing.F) {
	for _, s := range []string{"node[01-10,20],gpu-a[1-3]", "x[1-3]y[1-2]", "n[5-1]", "a,b c", "n[1-3", "[1-2]", "n[0-0]", "r[1-2]-n[01-02]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		hosts, err := ExpandHostlist(expr)
		if err != nil {
			return
		}
		n, err := HostlistCount(expr)
		if err != nil || n != len(hosts) {
			t.Fatalf("HostlistCount(%q) = %d, %v; expanded %d", expr, n, err, len(hosts))
		}
		if len(hosts) > 2000 {
			return
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, ", \t") {
				return // names a later parse would split differently
			}
		}
		again, err := ExpandHostlist(CompressHostlist(hosts))
		if err != nil {
			t.Fatalf("CompressHostlist(%q) does not parse: %v", hosts, err)
		}
		if len(again) > len(hosts) {
			t.Fatalf("compression of %q grew: %q", hosts, again)
		}
	})
}

// TestHostlistOracle compares with a real scontrol when one is installed and
// BERTH_SLURM_ORACLE=1 (apt-get install slurm-client; no daemon is needed).
func TestHostlistOracle(t *testing.T) {
	if os.Getenv("BERTH_SLURM_ORACLE") != "1" {
		t.Skip("set BERTH_SLURM_ORACLE=1 to compare with scontrol")
	}
	if _, err := exec.LookPath("scontrol"); err != nil {
		t.Skip("no scontrol")
	}
	useOracleConf(t)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		var hs []string
		for k := 1 + r.Intn(8); k > 0; k-- {
			p := []string{"n", "gpu", "r1-n", "r10-n"}[r.Intn(4)]
			hs = append(hs, formatHost(p, uint64(r.Intn(30)), r.Intn(3)))
		}
		list := strings.Join(hs, ",")
		out, err := exec.Command("scontrol", "show", "hostlist", list).Output()
		if err != nil {
			t.Fatal(err)
		}
		if want, got := strings.TrimSpace(string(out)), RangedHostlist(hs); want != got {
			t.Errorf("hostlist %s: scontrol %q, we %q", list, want, got)
		}
		out, err = exec.Command("scontrol", "show", "hostnames", list).Output()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := ExpandHostlist(list)
		if want := strings.Fields(string(out)); !cmp.Equal(want, got) {
			t.Errorf("hostnames %s: scontrol %q, we %q", list, want, got)
		}
		// Without duplicates, Slurm's sorted hostlist is our compression.
		seen := map[string]bool{}
		var uniq []string
		for _, h := range hs {
			if !seen[h] {
				seen[h] = true
				uniq = append(uniq, h)
			}
		}
		out, err = exec.Command("scontrol", "show", "hostlistsorted", strings.Join(uniq, ",")).Output()
		if err != nil {
			t.Fatal(err)
		}
		if want, got := strings.TrimSpace(string(out)), CompressHostlist(uniq); want != got {
			t.Errorf("hostlistsorted %q: scontrol %q, we %q", uniq, want, got)
		}
	}
}
