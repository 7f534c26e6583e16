package slurm

import (
	"errors"
	"testing"
	"time"
)

func TestParseTimeLimit(t *testing.T) {
	tests := map[string]struct {
		in   string
		want time.Duration
	}{
		"minutes":          {"10", 10 * time.Minute},
		"zero":             {"0", 0},
		"mm:ss rounds up":  {"0:01", time.Minute},
		"mm:ss":            {"5:30", 6 * time.Minute},
		"hh:mm:ss":         {"1:02:03", 63 * time.Minute},
		"days-hours":       {"1-2", 26 * time.Hour},
		"days-hh:mm":       {"1-02:30", 26*time.Hour + 30*time.Minute},
		"days-hh:mm:ss":    {"2-00:00:01", 48*time.Hour + time.Minute},
		"days only dash":   {"3-", 72 * time.Hour},
		"unlimited":        {"UNLIMITED", Unlimited},
		"infinite":         {"infinite", Unlimited},
		"minus one":        {"-1", Unlimited},
		"large minutes":    {"14400", 240 * time.Hour},
		"hours over a day": {"48:00:00", 48 * time.Hour},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseTimeLimit(tc.in)
			if err != nil || got != tc.want {
				t.Errorf("ParseTimeLimit(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// Each of these made Slurm 22.05's sbatch print "Invalid --time specification".
func TestParseTimeLimitInvalid(t *testing.T) {
	for _, in := range []string{"", "abc", "1:2:3:4", "1:", ":5", "1-2-3", "1-:2", "1-2:", "1h", "1.5", "-5"} {
		if d, err := ParseTimeLimit(in); !errors.Is(err, ErrTimeSpec) {
			t.Errorf("ParseTimeLimit(%q) = %v, %v; want ErrTimeSpec", in, d, err)
		}
	}
}

func TestDurationFormats(t *testing.T) {
	tests := []struct {
		d                     time.Duration
		limit, elapsed, queue string
	}{
		{0, "00:00:00", "00:00:00", "0:00"},
		{5 * time.Second, "00:00:00", "00:00:05", "0:05"},
		{10 * time.Minute, "00:10:00", "00:10:00", "10:00"},
		{82 * time.Second, "00:01:00", "00:01:22", "1:22"},
		{time.Hour + 2*time.Minute + 3*time.Second, "01:02:00", "01:02:03", "1:02:03"},
		{24 * time.Hour, "1-00:00:00", "1-00:00:00", "1-00:00:00"},
		{365 * 24 * time.Hour, "365-00:00:00", "365-00:00:00", "365-00:00:00"},
		{Unlimited, "UNLIMITED", "UNLIMITED", "INVALID"},
		{-time.Second, "INVALID", "INVALID", "INVALID"},
	}
	for _, tc := range tests {
		if got := FormatTimeLimit(tc.d); got != tc.limit {
			t.Errorf("FormatTimeLimit(%v) = %q, want %q", tc.d, got, tc.limit)
		}
		if got := FormatElapsed(tc.d); got != tc.elapsed {
			t.Errorf("FormatElapsed(%v) = %q, want %q", tc.d, got, tc.elapsed)
		}
		if got := FormatSqueueDuration(tc.d); got != tc.queue {
			t.Errorf("FormatSqueueDuration(%v) = %q, want %q", tc.d, got, tc.queue)
		}
	}
}

func TestFormatTimestamp(t *testing.T) {
	at := time.Date(2026, 11, 22, 1, 26, 7, 0, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want string
	}{
		{at, "2026-11-22T01:26:07"},
		{time.Time{}, "Unknown"},
		{time.Unix(0, 0), "Unknown"},
		{TimeNone, "None"},
	} {
		if got := FormatTimestamp(tc.t); got != tc.want {
			t.Errorf("FormatTimestamp(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestParseBegin(t *testing.T) {
	// The golden scenario: job 18 submitted 01:26:09 with --begin=now+1hour
	// became eligible at 02:26:09.
	now := time.Date(2026, 11, 22, 1, 26, 9, 0, time.UTC)
	tests := map[string]struct {
		in   string
		want time.Time
	}{
		"now plus hour":   {"now+1hour", time.Date(2026, 11, 22, 2, 26, 9, 0, time.UTC)},
		"now plus secs":   {"now+60", time.Date(2026, 11, 22, 1, 27, 9, 0, time.UTC)},
		"now plus days":   {"now+2days", time.Date(2026, 11, 24, 1, 26, 9, 0, time.UTC)},
		"now minus":       {"now-2days", time.Date(2026, 11, 20, 1, 26, 9, 0, time.UTC)},
		"now plus weeks":  {"now + 1 week", time.Date(2026, 11, 29, 1, 26, 9, 0, time.UTC)},
		"now":             {"now", now},
		"later today":     {"16:00", time.Date(2026, 11, 22, 16, 0, 0, 0, time.UTC)},
		"earlier is next": {"01:00", time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)},
		"seconds":         {"10:20:30", time.Date(2026, 11, 22, 10, 20, 30, 0, time.UTC)},
		"pm":              {"3:15pm", time.Date(2026, 11, 22, 15, 15, 0, 0, time.UTC)},
		"12am":            {"12:00am", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		"iso date":        {"2026-12-01", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		"iso date time":   {"2026-12-01T10:30", time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)},
		"iso full":        {"2026-12-01T10:30:45", time.Date(2026, 12, 1, 10, 30, 45, 0, time.UTC)},
		"midnight":        {"midnight", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		"noon":            {"noon", time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)},
		"fika":            {"fika", time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)},
		"teatime":         {"teatime", time.Date(2026, 11, 22, 16, 0, 0, 0, time.UTC)},
		"today":           {"today", time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)},
		"tomorrow":        {"tomorrow", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		"tomorrow noon":   {"tomorrow noon", time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)},
		"mmdd next year":  {"0101", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		"mm/dd/yy":        {"11/25/27", time.Date(2027, 11, 25, 0, 0, 0, 0, time.UTC)},
		"mm/dd this year": {"12/24", time.Date(2026, 12, 24, 0, 0, 0, 0, time.UTC)},
		"date and time":   {"12/24 18:00", time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC)},
		"uts":             {"uts1795310769", time.Unix(1795310769, 0).UTC()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBegin(tc.in, now, false)
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("ParseBegin(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// Positions as Slurm 22.05's sbatch reported them.
func TestParseBeginErrors(t *testing.T) {
	now := time.Date(2026, 11, 22, 4, 29, 5, 0, time.UTC)
	tests := []struct {
		in    string
		pos   int
		quiet bool
	}{
		{"garbage", 0, false},
		{"now+", 3, false},
		{"now+1x", 4, false},
		{"now+1hour30", 9, false},
		{"25:00", 0, false},
		{"12:61", 3, false},
		{"2026-13-01", 5, false},
		{"2026-11-32", 8, false},
		{"13/01", 0, false},
		{"now x", 4, false},
		{"12:00xm", 5, false},
		{"1x", 1, false},
		{"noon+1", 4, false},
		{"tomorrowx", 8, false},
		{"T", 1, true},
	}
	for _, tc := range tests {
		_, err := ParseBegin(tc.in, now, false)
		var be *BeginError
		if !errors.As(err, &be) {
			t.Errorf("ParseBegin(%q) = %v, want a *BeginError", tc.in, err)
			continue
		}
		if be.Pos != tc.pos || be.Quiet != tc.quiet {
			t.Errorf("ParseBegin(%q): pos %d quiet %v, want pos %d quiet %v", tc.in, be.Pos, be.Quiet, tc.pos, tc.quiet)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"10", "0:01", "1-2", "1-02:03:04", "UNLIMITED", "1:2:3:4", "-5", "99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil || d == Unlimited {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		// What FormatElapsed prints parses back to the same duration.
		back, err := ParseDuration(FormatElapsed(d))
		if err != nil || back != d {
			t.Fatalf("ParseDuration(FormatElapsed(%v)) = %v, %v", d, back, err)
		}
	})
}

func FuzzParseBegin(f *testing.F) {
	for _, s := range []string{"now+1hour", "16:00", "2026-12-01T10:30", "11/25/27", "teatime", "uts1795310769", "now-", "12:00pm"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 1, 26, 9, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseBegin(s, now, false)
		if err != nil {
			var be *BeginError
			if !errors.As(err, &be) {
				t.Fatalf("ParseBegin(%q) error %T", s, err)
			}
			return
		}
		if got.IsZero() {
			t.Fatalf("ParseBegin(%q) accepted the zero time", s)
		}
	})
}

// What sbatch -v printed as "time" for each --time value (Slurm 22.05.8).
func TestTimeLimitAsSbatchPrintsIt(t *testing.T) {
	for in, want := range map[string]string{
		"0": "UNLIMITED", "1": "00:01:00", "59": "00:59:00", "60": "01:00:00", "61": "01:01:00",
		"1440": "1-00:00:00", "0:01": "00:01:00", "0:59": "00:01:00", "1:00": "00:01:00", "1:30": "00:02:00",
		"1:00:00": "01:00:00", "25:00:00": "1-01:00:00", "1-0": "1-00:00:00", "1-2": "1-02:00:00",
		"1-2:3": "1-02:03:00", "1-2:3:4": "1-02:04:00", "3-": "3-00:00:00", "100-0": "100-00:00:00",
		"INFINITE": "UNLIMITED", "unlimited": "UNLIMITED", "-1": "UNLIMITED",
	} {
		d, err := ParseTimeLimit(in)
		if err != nil {
			t.Errorf("ParseTimeLimit(%q): %v", in, err)
			continue
		}
		if d == 0 {
			d = Unlimited // sbatch's rule for 0
		}
		if got := FormatTimeLimit(d); got != want {
			t.Errorf("--time=%s prints %q, sbatch printed %q", in, got, want)
		}
	}
}
