package slurm

import (
	"errors"
	"strconv"
	"strings"
)

// ErrGRES is returned for a --gres or --gpus value Slurm refuses ("Invalid
// generic resource (gres) specification").
var ErrGRES = errors.New("slurm: invalid generic resource (gres) specification")

// GRES is one generic resource request: Count of Name, of model Type when
// given ("gpu", "a100", 2).
type GRES struct {
	Name  string
	Type  string
	Count int64
}

// ParseGRES parses --gres: comma-separated "name[:type][:count]" items,
// each optionally prefixed "gres:"; count defaults to 1 and may carry a
// k, m or g multiplier (of 1024). "none" gives nil. Bindings such as
// "(S:0)" are not supported.
func ParseGRES(s string) ([]GRES, error) {
	if strings.EqualFold(s, "none") {
		return nil, nil
	}
	var out []GRES
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimPrefix(item, "gres:")
		f := strings.Split(item, ":")
		if f[0] == "" || len(f) > 3 || !gresName(f[0]) {
			return nil, ErrGRES
		}
		g := GRES{Name: f[0], Count: 1}
		switch len(f) {
		case 2:
			if n, ok := gresCount(f[1]); ok {
				g.Count = n
			} else if gresName(f[1]) {
				g.Type = f[1]
			} else {
				return nil, ErrGRES
			}
		case 3:
			n, ok := gresCount(f[2])
			if !ok || !gresName("t"+f[1]) { // a type may start with a digit here: gpu:3090:2
				return nil, ErrGRES
			}
			g.Type, g.Count = f[1], n
		}
		out = append(out, g)
	}
	return out, nil
}

// ParseGPUs parses --gpus, --gpus-per-node, --gpus-per-task and
// --gpus-per-socket: comma-separated "[type:]count" items, each optionally
// prefixed "gpu:".
func ParseGPUs(s string) ([]GRES, error) {
	var out []GRES
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimPrefix(item, "gpu:")
		typ, num, hasType := strings.Cut(item, ":")
		if !hasType {
			typ, num = "", item
		}
		n, ok := gresCount(num)
		if !ok || (hasType && !gresName(typ)) {
			return nil, ErrGRES
		}
		out = append(out, GRES{Name: "gpu", Type: typ, Count: n})
	}
	return out, nil
}

func gresName(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z' || s[0] == '_') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return false
		}
	}
	return true
}

func gresCount(s string) (int64, bool) {
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1024
		case 'm', 'M':
			mult = 1024 * 1024
		case 'g', 'G':
			mult = 1024 * 1024 * 1024
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	if !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

// TRESString prints requests as Slurm's tres_per_node and tres_per_job do:
// "gres:gpu:2", "gres:gpu:a100:2,gres:nic:1".
func TRESString(gres []GRES) string {
	parts := make([]string, len(gres))
	for i, g := range gres {
		s := "gres:" + g.Name
		if g.Type != "" {
			s += ":" + g.Type
		}
		parts[i] = s + ":" + strconv.FormatInt(g.Count, 10)
	}
	return strings.Join(parts, ",")
}
