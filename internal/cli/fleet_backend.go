package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// Backend fleets from a file (issue 17): `berth apply -f fleet.yml` of a
// `type: fleet` with `nodes:`. The plan shows the fleet's size, the
// offers its nodes come from and how many it creates now; apply stores
// the fleet on the server, whose autoscaler creates its nodes, and
// follows them until the fleet holds its minimum (or target).

// backendFollowLimit bounds how long apply waits for the first nodes.
const backendFollowLimit = 10 * time.Minute

func applyBackendFleetFile(ctx context.Context, out, errw io.Writer, in io.Reader, file string, data []byte, f *spec.Fleet, o fleetApplyOpts) error {
	if err := f.Env.Resolve(os.LookupEnv); err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s: %w", file, err)}
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	req := api.FleetApplyRequest{Spec: f, Source: file, ServerURL: o.serverURL}
	plan, err := c.PlanFleet(ctx, req)
	if err != nil {
		return placeError(err, file, data)
	}
	printBackendFleetPlan(errw, file, plan)
	if o.dryRun {
		return nil
	}
	if !o.yes && !confirm(in, errw, fmt.Sprintf("Apply the fleet %s? [y/n]: ", f.Name)) {
		fmt.Fprintln(errw, "Nothing applied.")
		return &ExitError{Code: 1}
	}
	if _, err := c.ApplyFleet(ctx, req); err != nil {
		return placeError(err, file, data)
	}
	want := 0
	if b := plan.Backend; b != nil {
		want = max(b.Min, b.Target)
	}
	if o.detach || want == 0 {
		fmt.Fprintf(out, "Fleet %s applied: its nodes are created on demand (berth fleet shows them)\n", f.Name)
		return nil
	}
	fl, err := followBackendFleet(ctx, c, out, f.Name, want)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Fleet %s: %s, %d of %d nodes ready\n", fl.Name, fl.Status, readyInstances(fl), want)
	return nil
}

func printBackendFleetPlan(w io.Writer, file string, p *api.FleetPlan) {
	what := "new"
	if p.Exists {
		what = "update in place"
	}
	fmt.Fprintf(w, " Configuration  %s\n Fleet          %s (%s, backend)\n Project        %s\n", file, p.Fleet, what, p.Project)
	b := p.Backend
	if b == nil {
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, " Nodes          min %d, target %d, max %d: holds %d, creates %d now\n", b.Min, b.Target, b.Max, b.Holds, b.CreateNow)
	fmt.Fprintf(w, " Idle duration  %s\n Spot policy    %s\n\n", b.IdleDuration, b.SpotPolicy)
	fmt.Fprintln(w, " Offers its nodes come from (cheapest first; the first that fits is used):")
	_ = printOffers(w, b.Offers)
	if len(b.Notes) > 0 {
		fmt.Fprintln(w, "\n Notes:")
		for _, n := range b.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	fmt.Fprintln(w)
}

// readyInstances counts a fleet's instances whose node is in service.
func readyInstances(fl *api.Fleet) int {
	n := 0
	for _, in := range fl.Instances {
		if in.State == "active" && (strings.HasPrefix(in.NodeState, "idle") || strings.HasPrefix(in.NodeState, "busy")) {
			n++
		}
	}
	return n
}

// followBackendFleet prints each instance's state as it changes until
// want nodes are in service (or backendFollowLimit passes).
func followBackendFleet(ctx context.Context, c *client.Client, out io.Writer, name string, want int) (*api.Fleet, error) {
	seen := map[string]string{}
	deadline := time.Now().Add(backendFollowLimit)
	for {
		fl, err := c.Fleet(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, in := range fl.Instances {
			line := in.State
			if in.NodeState != "" {
				line += ", node " + in.NodeState
			}
			if in.Detail != "" {
				line += ": " + in.Detail
			}
			if seen[in.Key] != line {
				seen[in.Key] = line
				fmt.Fprintf(out, "  %-22s %-10s %s\n", in.Node, in.Offer.Instance, line)
			}
		}
		if readyInstances(fl) >= want || time.Now().After(deadline) {
			return fl, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(fleetPoll):
		}
	}
}

// printBackendFleets is berth fleet's table of the backend fleets applied
// from files: each instance, its offer and its node's state.
func printBackendFleets(w io.Writer, fleets []api.Fleet) error {
	if len(fleets) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND FLEET\tPROJECT\tSTATUS\tNODES\tNODE\tINSTANCE\tSTATE\tNODE STATE")
	for _, f := range fleets {
		size := "-"
		if n := f.Spec.Nodes; n != nil {
			size = fmt.Sprintf("%d..", n.Min)
			if n.Max != nil {
				size += fmt.Sprint(*n.Max)
			}
		}
		if len(f.Instances) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t%s\n", f.Name, f.Project, f.Status, size, orDash(f.Message))
		}
		for _, in := range f.Instances {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Project, f.Status, size, in.Node, in.Offer.Backend+"/"+in.Offer.Instance, in.State, orDash(in.NodeState))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Each fleet's last failed creation, once (not one line per try).
	for _, f := range fleets {
		if e := f.LastError; e != nil {
			fmt.Fprintf(w, "Fleet %s: creating an instance failed at %s (next try at %s): %s\n", f.Name,
				e.At.Local().Format(time.TimeOnly), e.RetryAt.Local().Format(time.TimeOnly), e.Message)
		}
	}
	return nil
}
