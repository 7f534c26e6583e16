package spec

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseArray(t *testing.T) {
	r := func(first, last, step int) IndexRange { return IndexRange{first, last, step} }
	tests := map[string]struct {
		in      string
		want    *ArraySpec
		str     string // String(), when it differs from in
		wantErr string
	}{
		"single":           {in: "7", want: &ArraySpec{Ranges: []IndexRange{r(7, 7, 1)}}},
		"zero":             {in: "0", want: &ArraySpec{Ranges: []IndexRange{r(0, 0, 1)}}},
		"range":            {in: "0-15", want: &ArraySpec{Ranges: []IndexRange{r(0, 15, 1)}}},
		"throttle":         {in: "1-100%10", want: &ArraySpec{Ranges: []IndexRange{r(1, 100, 1)}, Throttle: 10}},
		"step":             {in: "0-15:4", want: &ArraySpec{Ranges: []IndexRange{r(0, 12, 4)}}, str: "0-12:4"},
		"step exact":       {in: "1-7:2", want: &ArraySpec{Ranges: []IndexRange{r(1, 7, 2)}}},
		"list":             {in: "1,3,5-7", want: &ArraySpec{Ranges: []IndexRange{r(1, 1, 1), r(3, 3, 1), r(5, 7, 1)}}},
		"spaces":           {in: " 1, 3 ,5-7 % 2 ", want: &ArraySpec{Ranges: []IndexRange{r(1, 1, 1), r(3, 3, 1), r(5, 7, 1)}, Throttle: 2}, str: "1,3,5-7%2"},
		"unsorted":         {in: "9,2,5", want: &ArraySpec{Ranges: []IndexRange{r(2, 2, 1), r(5, 5, 1), r(9, 9, 1)}}, str: "2,5,9"},
		"duplicates merge": {in: "3,3,1-5", want: &ArraySpec{Ranges: []IndexRange{r(1, 5, 1)}}, str: "1-5"},
		"adjacent merge":   {in: "1-3,4-7,8", want: &ArraySpec{Ranges: []IndexRange{r(1, 8, 1)}}, str: "1-8"},
		"progression":      {in: "0-8:4,12,16-20:4", want: &ArraySpec{Ranges: []IndexRange{r(0, 20, 4)}}, str: "0-20:4"},
		"interleaved":      {in: "0-10:2,1-9:2", want: &ArraySpec{Ranges: []IndexRange{r(0, 10, 1)}}, str: "0-10"},
		"overlap steps":    {in: "1-9:2,4-6", want: &ArraySpec{Ranges: []IndexRange{r(1, 1, 1), r(3, 7, 1), r(9, 9, 1)}}, str: "1,3-7,9"},
		"step one index":   {in: "5-6:3", want: &ArraySpec{Ranges: []IndexRange{r(5, 5, 1)}}, str: "5"},
		"max index":        {in: "4000000", want: &ArraySpec{Ranges: []IndexRange{r(MaxArrayIndex, MaxArrayIndex, 1)}}},
		"large":            {in: "0-99999%50", want: &ArraySpec{Ranges: []IndexRange{r(0, 99999, 1)}, Throttle: 50}},

		"empty":              {in: " ", wantErr: "empty array (expected e.g. 0-15, 1,3,5-7, 0-15:4 or 1-100%10)"},
		"empty item":         {in: "1,,3", wantErr: `array "1,,3": empty item (look for ",," or a leading or trailing ",")`},
		"trailing comma":     {in: "1,", wantErr: `array "1,": empty item (look for ",," or a leading or trailing ",")`},
		"non-numeric":        {in: "a-3", wantErr: `array "a-3": invalid index "a" (expected a number)`},
		"float":              {in: "1.5", wantErr: `array "1.5": invalid index "1.5" (expected a number)`},
		"negative":           {in: "-1", wantErr: `array "-1": index -1 is negative (indexes start at 0)`},
		"negative end":       {in: "1--3", wantErr: `array "1--3": index -3 is negative`},
		"backwards":          {in: "1-0", wantErr: `array "1-0": range 1-0 is backwards (the start is after the end)`},
		"open range":         {in: "5-", wantErr: `array "5-": missing index (expected N, A-B or A-B:STEP)`},
		"zero step":          {in: "1-7:0", wantErr: `array "1-7:0": step must be at least 1, got 0`},
		"negative step":      {in: "1-7:-2", wantErr: `array "1-7:-2": step must be at least 1, got -2`},
		"step without range": {in: "5:2", wantErr: `array "5:2": a step needs a range: write A-B:2, e.g. 1-7:2`},
		"zero throttle":      {in: "1-10%0", wantErr: `array "1-10%0": throttle must be at least 1, got 0`},
		"negative throttle":  {in: "1-10%-3", wantErr: `array "1-10%-3": throttle must be at least 1, got -3`},
		"missing throttle":   {in: "1-10%", wantErr: `array "1-10%": missing throttle after % (e.g. 1-100%10 runs at most 10 tasks at once)`},
		"throttle first":     {in: "%4", wantErr: `array "%4": no indexes before the throttle (e.g. 1-100%10)`},
		"throttle middle":    {in: "1-5%2,7", wantErr: `array "1-5%2,7": the throttle %N goes at the very end, after every index`},
		"throttle word":      {in: "1-5%x", wantErr: `array "1-5%x": invalid throttle "x" (expected a number of tasks)`},
		"too large":          {in: "0-4000001", wantErr: `array "0-4000001": index 4000001 is above the maximum 4000000`},
		"huge":               {in: "99999999999999999999", wantErr: `array "99999999999999999999": index 99999999999999999999 is above the maximum 4000000`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseArray(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseArray(%q) = %v, want error %q", tc.in, got, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("errors.Is(err, ErrInvalid) = false")
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseArray(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseArray(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
			str := tc.str
			if str == "" {
				str = tc.in
			}
			if got.String() != str {
				t.Errorf("String() = %q, want %q", got.String(), str)
			}
		})
	}
}

func TestArrayAccessors(t *testing.T) {
	tests := map[string]struct {
		in                    string
		count, min, max, step int
		first3                []int
	}{
		"range":      {in: "1-100%10", count: 100, min: 1, max: 100, step: 1, first3: []int{1, 2, 3}},
		"step":       {in: "0-15:4", count: 4, min: 0, max: 12, step: 4, first3: []int{0, 4, 8}},
		"list":       {in: "1,3,5-7", count: 5, min: 1, max: 7, step: 1, first3: []int{1, 3, 5}},
		"single":     {in: "7", count: 1, min: 7, max: 7, step: 1, first3: []int{7}},
		"two steps":  {in: "0-4:2,10-20:5", count: 6, min: 0, max: 20, step: 1, first3: []int{0, 2, 4}},
		"100k tasks": {in: "0-99999", count: 100000, min: 0, max: 99999, step: 1, first3: []int{0, 1, 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := ParseArray(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := []int{a.Count(), a.Min(), a.Max(), a.Step()}
			if diff := cmp.Diff([]int{tc.count, tc.min, tc.max, tc.step}, got); diff != "" {
				t.Errorf("Count, Min, Max, Step mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.first3, a.Indices(0, 3)); diff != "" {
				t.Errorf("Indices(0, 3) mismatch (-want +got):\n%s", diff)
			}
		})
	}
	a, _ := ParseArray("1,3,5-7")
	if diff := cmp.Diff([]int{5, 6}, a.Indices(2, 4)); diff != "" {
		t.Errorf("Indices(2, 4) mismatch (-want +got):\n%s", diff)
	}
	if got := a.Indices(-5, 99); !slices.Equal(got, []int{1, 3, 5, 6, 7}) {
		t.Errorf("Indices(-5, 99) = %v, want all", got)
	}
	if got := a.Indices(3, 3); got != nil {
		t.Errorf("Indices(3, 3) = %v, want nil", got)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("At(5) of 5 tasks did not panic")
		}
	}()
	a.At(5)
}

// TestArrayAgainstNaive builds random index lists, writes them in the
// array syntax and checks the parsed spec against a plain set: Count, At,
// Contains, Ordinal, All, Indices, and that String parses back to the same
// spec.
func TestArrayAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		span := []int{10, 60, 300, 5000}[iter%4]
		var items []string
		set := map[int]bool{}
		for range 1 + rng.IntN(6) {
			a := rng.IntN(span)
			switch rng.IntN(3) {
			case 0:
				items = append(items, strconv.Itoa(a))
				set[a] = true
			case 1:
				b := a + rng.IntN(span/4+1)
				items = append(items, strconv.Itoa(a)+"-"+strconv.Itoa(b))
				for i := a; i <= b; i++ {
					set[i] = true
				}
			default:
				b, step := a+rng.IntN(span/2+1), 1+rng.IntN(7)
				items = append(items, strconv.Itoa(a)+"-"+strconv.Itoa(b)+":"+strconv.Itoa(step))
				for i := a; i <= b; i += step {
					set[i] = true
				}
			}
		}
		in := strings.Join(items, ",")
		if rng.IntN(4) == 0 {
			in += "%" + strconv.Itoa(1+rng.IntN(20))
		}
		a, err := ParseArray(in)
		if err != nil {
			t.Fatalf("ParseArray(%q): %v", in, err)
		}
		want := make([]int, 0, len(set))
		for i := range set {
			want = append(want, i)
		}
		slices.Sort(want)

		if a.Count() != len(want) {
			t.Fatalf("%q: Count = %d, want %d", in, a.Count(), len(want))
		}
		if got := slices.Collect(a.All()); !slices.Equal(got, want) {
			t.Fatalf("%q: All = %v, want %v", in, got, want)
		}
		if got := a.Indices(0, a.Count()); !slices.Equal(got, want) {
			t.Fatalf("%q: Indices = %v, want %v", in, got, want)
		}
		for k, i := range want {
			if a.At(k) != i {
				t.Fatalf("%q: At(%d) = %d, want %d", in, k, a.At(k), i)
			}
			if o, ok := a.Ordinal(i); !ok || o != k {
				t.Fatalf("%q: Ordinal(%d) = %d, %v, want %d", in, i, o, ok, k)
			}
		}
		for i := -1; i <= span*2; i++ {
			if a.Contains(i) != set[i] {
				t.Fatalf("%q: Contains(%d) = %v, want %v", in, i, a.Contains(i), set[i])
			}
		}
		if a.Min() != want[0] || a.Max() != want[len(want)-1] {
			t.Fatalf("%q: Min, Max = %d, %d, want %d, %d", in, a.Min(), a.Max(), want[0], want[len(want)-1])
		}
		checkArrayRoundTrip(t, in, a)
	}
}

// checkArrayRoundTrip asserts the invariants of a parsed spec: ranges
// normalized, sorted and disjoint, and String parses back to the same spec.
func checkArrayRoundTrip(t *testing.T, in string, a *ArraySpec) {
	t.Helper()
	if len(a.Ranges) == 0 {
		t.Fatalf("ParseArray(%q) accepted an empty spec", in)
	}
	for i, r := range a.Ranges {
		if r.First < 0 || r.Last > MaxArrayIndex || r.Step < 1 || r.Last < r.First || (r.Last-r.First)%r.Step != 0 || (r.single() && r.Step != 1) {
			t.Fatalf("ParseArray(%q): range %d is not normalized: %+v", in, i, r)
		}
		if i > 0 && r.First <= a.Ranges[i-1].Last {
			t.Fatalf("ParseArray(%q): ranges %d and %d overlap: %+v", in, i-1, i, a.Ranges)
		}
	}
	again, err := ParseArray(a.String())
	if err != nil {
		t.Fatalf("ParseArray(%q) → %q does not parse: %v", in, a.String(), err)
	}
	if diff := cmp.Diff(a, again); diff != "" {
		t.Fatalf("ParseArray(%q) → %q changes the value (-first +second):\n%s", in, a.String(), diff)
	}
}

// TestArrayWorstCase: overlapping items are merged through a bitmap; a
// configuration that would make that expensive is refused, and the
// accepted worst cases stay fast.
func TestArrayWorstCase(t *testing.T) {
	full := "0-" + strconv.Itoa(MaxArrayIndex)
	a, err := ParseArray(strings.Repeat(full+",", 5000) + full + ":2")
	if err != nil || a.String() != full {
		t.Fatalf("repeated full range: %v, %v", a, err)
	}
	a, err = ParseArray(full + ",1-" + strconv.Itoa(MaxArrayIndex) + ":2")
	if err != nil || a.String() != full {
		t.Fatalf("full range and a stepped one: %v, %v", a, err)
	}
	var items []string
	for i := range 40 {
		items = append(items, strconv.Itoa(i)+"-"+strconv.Itoa(MaxArrayIndex)+":2")
	}
	_, err = ParseArray(strings.Join(items, ","))
	want := "overlapping items too costly to merge; write the indexes as ranges that do not overlap"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("40 overlapping stepped full ranges: err = %v, want %q", err, want)
	}
	_, err = ParseArray("0-4000000:3,1-4000000:3") // would be 1,333,334 ranges
	want = "overlapping items merge into more than 10000 separate ranges; write the indexes as ranges that do not overlap"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("interleaved progressions: err = %v, want %q", err, want)
	}
	a, err = ParseArray("0-100:2,50-60,1-99:2")
	if err != nil || a.String() != "0-100" {
		t.Fatalf("ordinary overlaps: %v, %v", a, err)
	}
}

func TestArrayFrom(t *testing.T) {
	a, err := ParseArray("1-3,10-20:5,30%4")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []string{"1-3,10-20:5,30", "2-3,10-20:5,30", "3,10-20:5,30", "10-20:5,30", "15-20:5,30", "20,30", "30", ""} {
		if got := a.From(k).String(); got != want {
			t.Errorf("From(%d) = %q, want %q", k, got, want)
		}
		if got := a.From(k).Count(); got != a.Count()-k {
			t.Errorf("From(%d) has %d indices, want %d", k, got, a.Count()-k)
		}
	}
}

func TestArrayWithout(t *testing.T) {
	a, err := ParseArray("1-10,20-40:10%2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		drop []int
		want string
	}{
		{nil, "1-10,20-40:10"},
		{[]int{1}, "2-10,20-40:10"},
		{[]int{10, 30}, "1-9,20,40"},
		{[]int{5, 25, 99}, "1-4,6-10,20-40:10"}, // 25 and 99 are not indices
		{[]int{20, 30, 40}, "1-10"},
	} {
		w := a.Without(tc.drop)
		if got := w.String(); got != tc.want {
			t.Errorf("Without(%v) = %q, want %q", tc.drop, got, tc.want)
		}
		n := 0
		for i := range a.All() {
			if !slices.Contains(tc.drop, i) {
				n++
			}
		}
		if w.Count() != n {
			t.Errorf("Without(%v) has %d indices, want %d", tc.drop, w.Count(), n)
		}
	}
}
