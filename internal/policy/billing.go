package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Billing weights are Slurm's TRESBillingWeights: what one unit of each
// resource a job holds counts for, per second, in billing units. The
// policy file gives a default (billing_weights) and a fleet its own
// (fleets.NAME.billing_weights), in Slurm's spelling:
//
//	billing_weights: "CPU=1.0,Mem=0.25G,GRES/gpu=2.0,GRES/gpu:a100=4.0"
//
// Mem's weight is per MB, or per GB/TB with the suffix G/T (Slurm's
// meaning). A job on a fleet without weights bills its CPUs, Slurm's
// default.

// BillingWeights is one set of TRESBillingWeights.
type BillingWeights struct {
	CPU      float64
	MemPerMB float64
	GPU      float64
	// GPUTypes weigh GPUs by model name, lower case ("a100"); a typed
	// GPU counts under its type and under GPU, as in Slurm.
	GPUTypes map[string]float64
	// Text is the setting as written.
	Text string
}

// Alloc is what a job holds, for billing: GPUs by model word
// ("nvidia a100-sxm4" counts as a100 too).
type Alloc struct {
	CPUs     int
	Memory   int64 // bytes
	GPUs     int
	GPUTypes map[string]int
}

// ParseBillingWeights reads Slurm's TRESBillingWeights text.
func ParseBillingWeights(s string) (*BillingWeights, error) {
	w := &BillingWeights{Text: s}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want TRES=WEIGHT, e.g. CPU=1.0,Mem=0.25G,GRES/gpu=2.0", item)
		}
		scale := 1.0
		lk := strings.ToLower(strings.TrimSpace(k))
		if lk == "mem" {
			switch {
			case strings.HasSuffix(v, "K"), strings.HasSuffix(v, "k"):
				v, scale = v[:len(v)-1], 1.0/1024
			case strings.HasSuffix(v, "M"), strings.HasSuffix(v, "m"):
				v = v[:len(v)-1]
			case strings.HasSuffix(v, "G"), strings.HasSuffix(v, "g"):
				v, scale = v[:len(v)-1], 1.0/1024
			case strings.HasSuffix(v, "T"), strings.HasSuffix(v, "t"):
				v, scale = v[:len(v)-1], 1.0/(1024*1024)
			}
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 {
			return nil, fmt.Errorf("%q: the weight must be a number, 0 or more", item)
		}
		switch {
		case lk == "cpu":
			w.CPU = f
		case lk == "mem":
			w.MemPerMB = f * scale
		case lk == "gres/gpu":
			w.GPU = f
		case strings.HasPrefix(lk, "gres/gpu:"):
			if w.GPUTypes == nil {
				w.GPUTypes = map[string]float64{}
			}
			w.GPUTypes[strings.TrimPrefix(lk, "gres/gpu:")] = f
		default:
			return nil, fmt.Errorf("%q: Berth bills CPU, Mem, GRES/gpu and GRES/gpu:TYPE", item)
		}
	}
	return w, nil
}

// Billing is what an allocation counts for per second under w; nil
// weights bill the CPUs (Slurm's default when TRESBillingWeights is
// unset). Types are summed in name order, so the result does not depend
// on map order.
func (w *BillingWeights) Billing(a Alloc) float64 {
	if w == nil {
		return float64(a.CPUs)
	}
	b := w.CPU*float64(a.CPUs) + w.MemPerMB*float64(a.Memory)/(1<<20) + w.GPU*float64(a.GPUs)
	for _, typ := range sorted(w.GPUTypes) {
		b += w.GPUTypes[typ] * float64(a.GPUTypes[typ])
	}
	return b
}

// BillingFor is the weights of a fleet: its own, else the default, else nil.
func (p *Policy) BillingFor(fleet string) *BillingWeights {
	if w := p.Fleets[fleet].Billing; w != nil {
		return w
	}
	return p.Billing
}
