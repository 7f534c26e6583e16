//go:build !slim

package cli

import "embed"

// leanFS holds the Slurm commands' lean binary when `make build` put one
// in leanbin (see leanbin/README.md).
//
//go:embed leanbin
var leanFS embed.FS

// embeddedLean is the lean binary this one carries, or nil.
func embeddedLean() []byte {
	b, err := leanFS.ReadFile("leanbin/" + leanName)
	if err != nil {
		return nil
	}
	return b
}
