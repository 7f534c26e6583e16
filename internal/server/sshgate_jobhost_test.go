package server

import "testing"

// The gateway reads RUN-N-0 (berth attach's and dstack's name of job N)
// as job N of RUN, and nothing else as a job.
func TestJobHostName(t *testing.T) {
	tests := map[string]struct {
		host, run string
		num       int
		ok        bool
	}{
		"second job":        {"train-1-0", "train", 1, true},
		"dashed run name":   {"my-run-12-0", "my-run", 12, true},
		"run by ID":         {"42-3-0", "42", 3, true},
		"plain name":        {"train", "", 0, false},
		"another replica":   {"train-1-1", "", 0, false},
		"no job number":     {"train--0", "", 0, false},
		"nothing before it": {"-1-0", "", 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			run, num, ok := jobHostName(tc.host)
			if run != tc.run || num != tc.num || ok != tc.ok {
				t.Errorf("jobHostName(%q) = %q, %d, %v; want %q, %d, %v", tc.host, run, num, ok, tc.run, tc.num, tc.ok)
			}
		})
	}
}
