package slurm

import (
	"fmt"
	"strings"
	"time"
)

// ConfigPair is one line of scontrol show config: a key of slurm.conf and
// its value as printed.
type ConfigPair = [2]string

// ShowConfig is scontrol show config (slurm_print_ctl_conf): the time of the
// data, each pair as "%-23s = %s", then whether the controller is up.
func ShowConfig(asOf time.Time, pairs []ConfigPair, host string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Configuration data as of %s\n", FormatTimestamp(asOf))
	for _, p := range pairs {
		fmt.Fprintf(&b, "%-23s = %s\n", p[0], p[1])
	}
	fmt.Fprintf(&b, "\nSlurmctld(primary) at %s is UP\n", host)
	return b.String()
}

// ConfigSeconds is a duration as scontrol show config prints most of them:
// "30 sec".
func ConfigSeconds(d time.Duration) string {
	return fmt.Sprintf("%d sec", int64(d/time.Second))
}
