package spec

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestParseGPU(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    *GPUSpec
		wantErr string
	}{
		"count only":      {in: "1", want: &GPUSpec{Count: exactly(1)}},
		"vendor count":    {in: "nvidia:2", want: &GPUSpec{Vendor: "nvidia", Count: exactly(2)}},
		"name":            {in: "A100", want: &GPUSpec{Names: []string{"A100"}, Count: exactly(1)}},
		"names":           {in: "A10G,A100", want: &GPUSpec{Names: []string{"A10G", "A100"}, Count: exactly(1)}},
		"open memory":     {in: "24GB..", want: &GPUSpec{Memory: &ByteRange{Min: 24 * GB}, Count: exactly(1)}},
		"memory count":    {in: "24GB..40GB:2", want: &GPUSpec{Memory: &ByteRange{Min: 24 * GB, Max: ptr(40 * GB)}, Count: exactly(2)}},
		"name memory":     {in: "A100:80GB", want: &GPUSpec{Names: []string{"A100"}, Memory: &ByteRange{Min: 80 * GB, Max: ptr(80 * GB)}, Count: exactly(1)}},
		"name count":      {in: "A100:2", want: &GPUSpec{Names: []string{"A100"}, Count: exactly(2)}},
		"name mem count":  {in: "A100:40GB:2", want: &GPUSpec{Names: []string{"A100"}, Memory: &ByteRange{Min: 40 * GB, Max: ptr(40 * GB)}, Count: exactly(2)}},
		"everything":      {in: "nvidia:A10G,A100:40GB..80GB:2..8", want: &GPUSpec{Vendor: "nvidia", Names: []string{"A10G", "A100"}, Memory: &ByteRange{Min: 40 * GB, Max: ptr(80 * GB)}, Count: IntRange{Min: 2, Max: ptr(8)}}},
		"ranges only":     {in: "40GB..80GB:4..8", want: &GPUSpec{Memory: &ByteRange{Min: 40 * GB, Max: ptr(80 * GB)}, Count: IntRange{Min: 4, Max: ptr(8)}}},
		"vendor range":    {in: "nvidia:1..8", want: &GPUSpec{Vendor: "nvidia", Count: IntRange{Min: 1, Max: ptr(8)}}},
		"any order":       {in: "2:80GB:H100:nvidia", want: &GPUSpec{Vendor: "nvidia", Names: []string{"H100"}, Memory: &ByteRange{Min: 80 * GB, Max: ptr(80 * GB)}, Count: exactly(2)}},
		"vendor any case": {in: "AMD:MI300X:8", want: &GPUSpec{Vendor: "amd", Names: []string{"MI300X"}, Count: exactly(8)}},
		"google is tpu":   {in: "google:v5litepod", want: &GPUSpec{Vendor: "tpu", Names: []string{"v5litepod"}, Count: exactly(1)}},
		"open count":      {in: "H100:2..", want: &GPUSpec{Names: []string{"H100"}, Count: IntRange{Min: 2}}},
		"upper count":     {in: "..4", want: &GPUSpec{Count: IntRange{Max: ptr(4)}}},
		"spaces ignored":  {in: " A100 : 2 ", want: &GPUSpec{Names: []string{"A100"}, Count: exactly(2)}},

		"empty":            {in: "", wantErr: "empty GPU spec"},
		"empty part":       {in: "A100::2", wantErr: `GPU spec "A100::2" has an empty part (look for "::" or a leading/trailing ":")`},
		"trailing colon":   {in: "A100:", wantErr: `GPU spec "A100:" has an empty part (look for "::" or a leading/trailing ":")`},
		"backwards memory": {in: "80GB..40GB", wantErr: `GPU memory "80GB..40GB": range 80GB..40GB: minimum is greater than maximum`},
		"backwards count":  {in: "A100:8..2", wantErr: `GPU count "8..2": range 8..2: minimum is greater than maximum`},
		"empty range":      {in: "A100:..", wantErr: `GPU count "..": empty range "..": give a minimum, a maximum or both`},
		"two counts":       {in: "2:4", wantErr: `GPU spec "2:4" has two counts ("2" and "4")`},
		"two vendors":      {in: "nvidia:amd", wantErr: `GPU spec "nvidia:amd" has two vendors ("nvidia" and "amd")`},
		"two names":        {in: "A100:H100", wantErr: `GPU spec "A100:H100" has two name lists ("A100" and "H100")`},
		"bad unit":         {in: "24XB", wantErr: `GPU memory "24XB": invalid size "24XB" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
		"negative count":   {in: "-1", wantErr: `GPU count "-1": "-1" is negative`},
		"empty name":       {in: "A100,,H100", wantErr: `GPU spec "A100,,H100": empty GPU name`},
		"duplicate name":   {in: "A100,a100", wantErr: `GPU spec "A100,a100": GPU name "a100" is listed twice`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGPU(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseGPU(%q) = %+v, want error %q", tc.in, got, tc.wantErr)
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
				t.Fatalf("ParseGPU(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseGPU(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestGPUSpecStringRoundTrip(t *testing.T) {
	for _, in := range []string{"1", "nvidia:2", "A10G,A100:1", "24GB..:1", "nvidia:A10G,A100:40GB..80GB:2..8", "..4", "H100:2.."} {
		g, err := ParseGPU(in)
		if err != nil {
			t.Fatalf("ParseGPU(%q): %v", in, err)
		}
		again, err := ParseGPU(g.String())
		if err != nil {
			t.Fatalf("ParseGPU(%q) (String of %q): %v", g.String(), in, err)
		}
		if diff := cmp.Diff(g, again); diff != "" {
			t.Errorf("%q → %q does not round-trip (-want +got):\n%s", in, g.String(), diff)
		}
	}
}

func TestParseCPU(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    *CPUSpec
		wantErr string
	}{
		"exact":      {in: "32", want: &CPUSpec{Count: exactly(32)}},
		"open":       {in: "2..", want: &CPUSpec{Count: IntRange{Min: 2}}},
		"closed":     {in: "2..8", want: &CPUSpec{Count: IntRange{Min: 2, Max: ptr(8)}}},
		"x86 range":  {in: "x86:4..8", want: &CPUSpec{Arch: "x86", Count: IntRange{Min: 4, Max: ptr(8)}}},
		"arm":        {in: "arm:4", want: &CPUSpec{Arch: "arm", Count: exactly(4)}},
		"bad arch":   {in: "ppc:4", wantErr: `CPU spec "ppc:4": architecture unknown value "ppc" (expected one of: x86, arm)`},
		"typo arch":  {in: "x68:4", wantErr: `CPU spec "x68:4": architecture unknown value "x68"; did you mean "x86"? (expected one of: x86, arm)`},
		"zero":       {in: "0", wantErr: `CPU spec "0": a node needs at least one CPU`},
		"from zero":  {in: "0..", wantErr: `CPU spec "0..": a node needs at least one CPU: the minimum of 0.. is 0 (write 1..)`},
		"up to":      {in: "..4", wantErr: `CPU spec "..4": a node needs at least one CPU: the minimum of ..4 is 0 (write 1..4)`},
		"too many":   {in: "2147483648", wantErr: `CPU spec "2147483648": number "2147483648" is too large`},
		"backwards":  {in: "8..2", wantErr: `CPU spec "8..2": range 8..2: minimum is greater than maximum`},
		"not number": {in: "many", wantErr: `CPU spec "many": invalid number "many" in "many"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCPU(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseCPU(%q) = %+v, want error", tc.in, got)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCPU(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Bytes
		wantErr string
	}{
		"GB":           {in: "200GB", want: 200 * GB},
		"TB":           {in: "1TB", want: TB},
		"MB":           {in: "512MB", want: 512 * MB},
		"fraction":     {in: "1.5GB", want: 3 * GB / 2},
		"lower case":   {in: "8gb", want: 8 * GB},
		"plain is GB":  {in: "32", want: 32 * GB},
		"plain frac":   {in: "0.5", want: GB / 2},
		"inner space":  {in: "16 GB", want: 16 * GB},
		"empty":        {in: "", wantErr: "empty size"},
		"negative":     {in: "-1GB", wantErr: `size "-1GB" is negative`},
		"bad unit":     {in: "1KB", wantErr: `invalid size "1KB" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
		"exponent":     {in: "1e3GB", wantErr: `invalid size "1e3GB" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
		"unit only":    {in: "GB", wantErr: `invalid size "GB" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
		"too large":    {in: "99999999999TB", wantErr: `size "99999999999TB" is too large`},
		"two dots":     {in: "1.2.3GB", wantErr: `invalid size "1.2.3GB" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
		"trailing dot": {in: "1.GB", wantErr: `invalid size "1.GB" (expected a number with an optional MB, GB or TB unit, e.g. 512MB, 80GB, 1.5TB)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBytes(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseBytes(%q) = %d, want error", tc.in, got)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBytes(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseBytes(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestBytesString(t *testing.T) {
	tests := map[Bytes]string{
		80 * GB:      "80GB",
		512 * MB:     "512MB",
		3 * TB / 2:   "1.5TB",
		TB:           "1TB",
		1536 * MB:    "1.5GB",
		0:            "0GB",
		100 * GB:     "100GB",
		1024 * TB:    "1024TB",
		2*GB + 1*MB:  "2049MB",
		Bytes(12345): "0.011773109436035156MB",
	}
	for in, want := range tests {
		if got := in.String(); got != want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int64(in), got, want)
		}
		if back, err := ParseBytes(in.String()); err != nil || back != in {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in.String(), back, err, in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    Duration
		wantErr string
	}{
		"seconds":        {in: "90s", want: 90},
		"minutes":        {in: "5m", want: 300},
		"hours":          {in: "2h", want: 7200},
		"days":           {in: "1d", want: 86400},
		"weeks":          {in: "1w", want: 604800},
		"compound":       {in: "1h30m", want: 5400},
		"long compound":  {in: "1w2d3h4m5s", want: 604800 + 2*86400 + 3*3600 + 4*60 + 5},
		"plain seconds":  {in: "3600", want: 3600},
		"zero":           {in: "0", want: 0},
		"empty":          {in: "", wantErr: "empty duration"},
		"negative":       {in: "-5m", wantErr: `duration "-5m" is negative`},
		"no unit amount": {in: "h", wantErr: `invalid duration "h" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`},
		"trailing digit": {in: "1h30", wantErr: `invalid duration "1h30" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`},
		"wrong order":    {in: "30m1h", wantErr: `invalid duration "30m1h" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`},
		"repeated unit":  {in: "1h1h", wantErr: `invalid duration "1h1h" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`},
		"unknown unit":   {in: "2y", wantErr: `invalid duration "2y" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`},
		"go style":       {in: "1.5h", wantErr: `invalid duration "1.5h" (expected e.g. 90s, 30m, 2h, 1d, 1w or 1h30m)`},
		"overflow":       {in: "99999999999999999w", wantErr: "duration \"99999999999999999w\" is too long: at most 100 years (36500d); use `off` for no limit"},
		"overflow plain": {in: "99999999999999999999", wantErr: "duration \"99999999999999999999\" is too long: at most 100 years (36500d); use `off` for no limit"},
		"over 100 years": {in: "999999999999w", wantErr: "duration \"999999999999w\" is too long: at most 100 years (36500d); use `off` for no limit"},
		"100 years":      {in: "36500d", want: 36500 * 86400},
		"just over":      {in: "3153600001", wantErr: "duration \"3153600001\" is too long: at most 100 years (36500d); use `off` for no limit"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("ParseDuration(%q) = %d, want error", tc.in, got)
				}
				if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
					t.Errorf("error mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDuration(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Errorf("ParseDuration(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestDurationString(t *testing.T) {
	tests := map[Duration]string{
		7200:        "2h",
		5400:        "1h30m",
		90:          "90s",
		0:           "0s",
		86400:       "1d",
		604800 + 60: "1w1m",
		300:         "5m",
		DurationOff: "off",
	}
	for in, want := range tests {
		if got := in.String(); got != want {
			t.Errorf("Duration(%d).String() = %q, want %q", int64(in), got, want)
		}
		if in >= 0 {
			if back, err := ParseDuration(want); err != nil || back != in {
				t.Errorf("ParseDuration(%q) = %d, %v; want %d", want, back, err, in)
			}
		}
	}
}

func TestRanges(t *testing.T) {
	ints := map[string]struct {
		want    IntRange
		wantErr string
	}{
		"4":       {want: exactly(4)},
		"2..":     {want: IntRange{Min: 2}},
		"..8":     {want: IntRange{Max: ptr(8)}},
		"2..8":    {want: IntRange{Min: 2, Max: ptr(8)}},
		"2 ..8":   {want: IntRange{Min: 2, Max: ptr(8)}},
		"..":      {wantErr: `empty range "..": give a minimum, a maximum or both`},
		"1..2..3": {wantErr: `invalid range "1..2..3"`},
		"8..2":    {wantErr: "range 8..2: minimum is greater than maximum"},
		"x":       {wantErr: `invalid number "x" in "x"`},
	}
	for in, tc := range ints {
		t.Run("int "+in, func(t *testing.T) {
			got, err := ParseIntRange(in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseIntRange(%q) error = %v, want %q", in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	bytes := map[string]struct {
		want    ByteRange
		wantErr string
	}{
		"200GB..":    {want: ByteRange{Min: 200 * GB}},
		"500GB..1TB": {want: ByteRange{Min: 500 * GB, Max: ptr(TB)}},
		"8GB":        {want: ByteRange{Min: 8 * GB, Max: ptr(8 * GB)}},
		"..1TB":      {want: ByteRange{Max: ptr(TB)}},
		"2TB..1TB":   {wantErr: "range 2TB..1TB: minimum is greater than maximum"},
		"":           {wantErr: "empty value"},
	}
	for in, tc := range bytes {
		t.Run("bytes "+in, func(t *testing.T) {
			got, err := ParseByteRange(in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ParseByteRange(%q) error = %v, want %q", in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckCron(t *testing.T) {
	tests := map[string]string{
		"15 23 * * *":          "",
		"*/5 * * * *":          "",
		"0 9-17/2 * * MON-FRI": "",
		"0 0 1,15 jan,jul *":   "",
		"30 4 1-7 * 0,7":       "",
		"5 0 * 8 sun":          "",
		"0 0 * * *  ":          "",
		"15 23 * *":            `invalid cron expression "15 23 * *": expected 5 fields (minute hour day-of-month month day-of-week), got 4`,
		"@daily":               `invalid cron expression "@daily": expected 5 fields (minute hour day-of-month month day-of-week), got 1; macros such as @daily are not supported, write e.g. "0 0 * * *"`,
		"60 * * * *":           `invalid cron expression "60 * * * *": minute field "60": 60 is out of range 0..59`,
		"* 24 * * *":           `invalid cron expression "* 24 * * *": hour field "24": 24 is out of range 0..23`,
		"* * 0 * *":            `invalid cron expression "* * 0 * *": day of month field "0": 0 is out of range 1..31`,
		"* * * 13 *":           `invalid cron expression "* * * 13 *": month field "13": 13 is out of range 1..12`,
		"* * * * 8":            `invalid cron expression "* * * * 8": day of week field "8": 8 is out of range 0..7`,
		"* * * * fir":          `invalid cron expression "* * * * fir": day of week field "fir": "fir" is not a number or a name; did you mean "fri"?`,
		"*/0 * * * *":          `invalid cron expression "*/0 * * * *": minute field "*/0": step 0 is out of range 1..60`,
		"5-1 * * * *":          `invalid cron expression "5-1 * * * *": minute field "5-1": range 5-1 is backwards`,
		"1,,2 * * * *":         `invalid cron expression "1,,2 * * * *": minute field "1,,2": empty list item`,
		"? * * * *":            `invalid cron expression "? * * * *": minute field "?": "?" is not a number`,
		"*/x * * * *":          `invalid cron expression "*/x * * * *": minute field "*/x": invalid step "x"`,
		"0 0 * * * *":          `invalid cron expression "0 0 * * * *": expected 5 fields (minute hour day-of-month month day-of-week), got 6`,
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			if diff := cmp.Diff(want, checkCron(in)); diff != "" {
				t.Errorf("checkCron(%q) mismatch (-want +got):\n%s", in, diff)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	known := topLevelNames()
	tests := map[string]string{
		"comands":      "commands",
		"max_duraton":  "max_duration",
		"priorty":      "priority",
		"startuporder": "startup_order",
		"xyzzy":        "",
		"a":            "",
	}
	for in, want := range tests {
		if got := suggest(in, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
