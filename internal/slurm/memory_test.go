package slurm

import (
	"errors"
	"testing"
)

func TestParseMemory(t *testing.T) {
	tests := map[string]int64{
		"1000": 1000 * MiB, "4G": 4096 * MiB, "4g": 4096 * MiB, "4GB": 4096 * MiB,
		"512M": 512 * MiB, "1K": 1 * MiB, "1025k": 2 * MiB, "2T": 2 * 1024 * 1024 * MiB,
		"0": 0, "100mb": 100 * MiB,
	}
	for in, want := range tests {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// Each made sbatch 22.05 print "Invalid --mem specification".
	for _, in := range []string{"", "4X", "-5", "G", "4GiB", "4 G", "1.5G", "99999999999999999999"} {
		if _, err := ParseMemory(in); !errors.Is(err, ErrMemorySpec) {
			t.Errorf("ParseMemory(%q) = %v, want ErrMemorySpec", in, err)
		}
	}
}

func TestFormatMemoryMB(t *testing.T) {
	tests := map[uint64]string{
		0: "0", 1000: "1000M", 4000: "4000M", 4096: "4G", 2048: "2G", 20000: "20000M",
		1536: "1.50G", 1024 * 1024: "1T", 512: "512M", 1024: "1G",
	}
	for in, want := range tests {
		if got := FormatMemoryMB(in); got != want {
			t.Errorf("FormatMemoryMB(%d) = %q, want %q", in, got, want)
		}
	}
}
