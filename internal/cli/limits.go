package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/berth-hq/berth/internal/spec"
)

// envMaxScriptSize raises the bound on a configuration's commands (a
// batch script) that berth apply and sbatch check before sending it, for a
// server that allows more than Slurm's default of 4 MB.
const envMaxScriptSize = "BERTH_MAX_SCRIPT_SIZE"

// submitLimits are the limits a configuration is checked against here:
// spec's (Slurm's) defaults, the script's from BERTH_MAX_SCRIPT_SIZE
// (bytes, or a size with a unit: 8MB).
func submitLimits(getenv func(string) string) (spec.Limits, error) {
	l := spec.DefaultLimits
	v := strings.TrimSpace(getenv(envMaxScriptSize))
	if v == "" {
		return l, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		b, perr := spec.ParseBytes(v)
		if perr != nil {
			return l, fmt.Errorf("%s=%s: %w", envMaxScriptSize, v, perr)
		}
		n = int64(b)
	}
	if n <= 0 {
		return l, fmt.Errorf("%s=%s: want a positive size, such as 8MB", envMaxScriptSize, v)
	}
	l.ScriptBytes = n
	return l, nil
}
