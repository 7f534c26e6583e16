package slurm

import (
	"errors"
	"strconv"
	"strings"
)

// MiB is one mebibyte, Slurm's memory unit ("M").
const MiB = 1 << 20

// ErrMemorySpec is returned for a memory size Slurm would not parse.
var ErrMemorySpec = errors.New("slurm: invalid memory specification")

// ParseMemory parses a memory size as --mem, --mem-per-cpu and --mem-per-gpu
// do (str_to_mbytes) and returns it in bytes: a number with an optional unit
// K, M, G or T (any case, optionally followed by B); no unit means
// megabytes. Slurm counts whole megabytes, so kilobytes round up to the next
// MiB ("1K" is 1 MiB) and the result is always a multiple of MiB.
func ParseMemory(s string) (int64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, ErrMemorySpec
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, ErrMemorySpec
	}
	unit := strings.ToUpper(s[i:])
	if len(unit) == 2 && unit[1] == 'B' {
		unit = unit[:1]
	}
	var mb int64
	switch unit {
	case "", "M":
		mb = n
	case "K":
		mb = (n + 1023) / 1024
	case "G":
		mb = n * 1024
	case "T":
		mb = n * 1024 * 1024
	default:
		return 0, ErrMemorySpec
	}
	if mb < 0 || mb > (1<<63-1)/MiB || (unit == "G" && mb/1024 != n) || (unit == "T" && mb/(1024*1024) != n) {
		return 0, ErrMemorySpec
	}
	return mb * MiB, nil
}

// FormatMemoryMB prints a size in megabytes as squeue's MIN_MEMORY, sacct's
// ReqMem and the mem= of TRES strings do (convert_num_unit, exact mode):
// larger units only while no precision is lost, halves allowed. 1000 gives
// "1000M", 4096 "4G", 1536 "1.50G", 0 "0".
func FormatMemoryMB(mb uint64) string {
	return convertNumUnit(float64(mb), unitMega)
}

// Unit indexes of convert_num_unit: "", K, M, G, T, P.
const (
	unitNone = iota
	unitKilo
	unitMega
)

func convertNumUnit(num float64, unit int) string {
	const units = "\x00KMGTP"
	if int64(num) == 0 {
		return "0"
	}
	for num >= 1024 && uint64(num)%512 == 0 && unit < len(units)-1 {
		num /= 1024
		unit++
	}
	suffix := ""
	if unit > 0 {
		suffix = units[unit : unit+1]
	}
	if num == float64(uint64(num)) {
		return strconv.FormatUint(uint64(num), 10) + suffix
	}
	return strconv.FormatFloat(num, 'f', 2, 64) + suffix
}
