package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/spec"
)

// newOfferCmd is `berth offer`: what the server's providers can lend,
// cheapest first, as dstack's `dstack offer` prints it.
func newOfferCmd() *cobra.Command {
	var (
		gpu, cpu, memory   string
		spot, onDemand, js bool
		maxPrice           float64
		backends, regions  []string
	)
	cmd := &cobra.Command{
		Use:   "offer",
		Short: "List the machines the server's providers can create, cheapest first (dstack offer)",
		Long: `List the offers of the providers configured on the server (the policy file's providers:), that
match the resources asked for, cheapest first. --gpu reads as in a configuration: [MODEL:][MEMORY:]COUNT,
e.g. 40GB..80GB:4..8 or H100:8.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q, err := offerQuery(gpu, cpu, memory, spot, onDemand, maxPrice)
			if err != nil {
				return err
			}
			q.Backends, q.Regions = backends, regions
			c, err := newClient()
			if err != nil {
				return err
			}
			offers, err := c.Offers(cmd.Context(), q)
			if err != nil {
				return err
			}
			if js {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(offers)
			}
			return printOffers(cmd.OutOrStdout(), offers)
		},
	}
	f := cmd.Flags()
	f.StringVar(&gpu, "gpu", "", "GPUs per node: [MODEL:][MEMORY:]COUNT, e.g. 24GB..:1 or 40GB..80GB:4..8")
	f.StringVar(&cpu, "cpu", "", "CPUs per node: N, N.. or N..M")
	f.StringVar(&memory, "memory", "", "memory per node: e.g. 8GB, 8GB.. or 8GB..64GB")
	f.BoolVar(&spot, "spot", false, "spot (interruptible) offers only")
	f.BoolVar(&onDemand, "on-demand", false, "on-demand offers only")
	f.Float64Var(&maxPrice, "max-price", 0, "the highest price per hour")
	f.StringSliceVar(&backends, "backend", nil, "these backends only")
	f.StringSliceVar(&regions, "region", nil, "these regions only")
	f.BoolVar(&js, "json", false, "print the offers as JSON")
	return cmd
}

func offerQuery(gpu, cpu, memory string, spot, onDemand bool, maxPrice float64) (provider.Query, error) {
	var q provider.Query
	if spot && onDemand {
		return q, fmt.Errorf("offer: --spot and --on-demand exclude each other")
	}
	if spot || onDemand {
		q.Spot = &spot
	}
	if maxPrice < 0 {
		return q, fmt.Errorf("offer: --max-price %g: must be 0 or more", maxPrice)
	}
	q.MaxPrice = maxPrice
	if cpu != "" {
		c, err := spec.ParseCPU(cpu)
		if err != nil {
			return q, fmt.Errorf("offer: --cpu: %w", err)
		}
		q.CPUs = intRange(c.Count)
	}
	if memory != "" {
		m, err := spec.ParseByteRange(memory)
		if err != nil {
			return q, fmt.Errorf("offer: --memory: %w", err)
		}
		q.Memory = byteRange(m)
	}
	if gpu != "" {
		g, err := spec.ParseGPU(gpu)
		if err != nil {
			return q, fmt.Errorf("offer: --gpu: %w", err)
		}
		q.GPUs = intRange(g.Count)
		if q.GPUs == (provider.Range{}) {
			q.GPUs.Min = 1
		}
		if g.Memory != nil {
			q.GPUMemory = byteRange(*g.Memory)
		}
		if len(g.Names) == 1 {
			q.GPUModel = g.Names[0]
		}
	}
	return q, nil
}

func intRange(r spec.IntRange) provider.Range {
	out := provider.Range{Min: int64(r.Min)}
	if r.Max != nil {
		out.Max = int64(*r.Max)
	}
	return out
}

func byteRange(r spec.ByteRange) provider.Range {
	out := provider.Range{Min: int64(r.Min)}
	if r.Max != nil {
		out.Max = int64(*r.Max)
	}
	return out
}

// printOffers prints dstack's offer table: #, BACKEND, REGION, INSTANCE,
// RESOURCES, SPOT, PRICE.
func printOffers(w io.Writer, offers []provider.Offer) error {
	if len(offers) == 0 {
		_, err := fmt.Fprintln(w, "No offers match (berth offer lists the providers of the server's policy file).")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, " #\tBACKEND\tREGION\tINSTANCE\tRESOURCES\tSPOT\tPRICE")
	for i, o := range offers {
		fmt.Fprintf(tw, " %d\t%s\t%s\t%s\t%s\t%s\t$%s\n", i+1, o.Backend, o.Region, o.Instance, offerResources(o), yesNo(o.Spot), price(o.Price))
	}
	return tw.Flush()
}

func offerResources(o provider.Offer) string {
	parts := []string{fmt.Sprintf("%dxCPU", o.CPUs), spec.Bytes(o.Memory).String()}
	if g := o.GPU; g != nil && g.Count > 0 {
		parts = append(parts, fmt.Sprintf("%dx%s (%s)", g.Count, g.Model, spec.Bytes(g.Memory)))
	}
	if o.Disk > 0 {
		parts = append(parts, spec.Bytes(o.Disk).String()+" (disk)")
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// price prints at least three decimals, as dstack ($0.010, $98.32).
func price(p float64) string {
	s := strconv.FormatFloat(p, 'f', -1, 64)
	if _, frac, _ := strings.Cut(s, "."); len(frac) < 3 {
		s = strconv.FormatFloat(p, 'f', 3, 64)
	}
	return s
}

// printPlanOffers lists, under a plan, what backend fleets could create
// for a run no node can start now.
func printPlanOffers(w io.Writer, offers []provider.Offer) {
	if len(offers) == 0 {
		return
	}
	fmt.Fprintln(w, "\n Offers a backend fleet can create for it (cheapest first):")
	_ = printOffers(w, offers)
}
