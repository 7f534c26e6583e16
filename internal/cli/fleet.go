package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// SSH fleets (issue 17): `berth apply -f fleet.yml` of a `type: fleet`,
// `berth fleet` (nodes, then the SSH fleets and their hosts), `berth
// fleet delete NAME`.

// fleetPoll is how often apply and delete look at the fleet's progress.
const fleetPoll = 300 * time.Millisecond

type fleetApplyOpts struct {
	yes, dryRun, allOrNothing, detach bool
	serverURL, project                string
}

// applyFleetFile is `berth apply -f` of a fleet configuration: the plan,
// the confirmation, then each host's progress until every host is ready
// or failed. The private keys its identity_file entries name are read
// here and sent along.
func applyFleetFile(ctx context.Context, out, errw io.Writer, in io.Reader, file string, data []byte, o fleetApplyOpts) error {
	f, err := spec.ParseFleet(file, data)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if o.project != "" {
		f.Project = o.project
	}
	if !f.IsSSH() {
		return applyBackendFleetFile(ctx, out, errw, in, file, data, f, o) // fleet_backend.go
	}
	keys := map[string]string{}
	for i := range f.SSHConfig.Hosts {
		h := f.Host(i)
		ids := []string{h.IdentityFile}
		if h.ProxyJump != nil {
			ids = append(ids, h.ProxyJump.IdentityFile)
		}
		for _, id := range ids {
			if _, ok := keys[id]; ok {
				continue
			}
			b, err := os.ReadFile(expandHome(id))
			if err != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("%s: identity_file: %w", file, err)}
			}
			keys[id] = string(b)
		}
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	url := o.serverURL
	if url == "" {
		url = c.BaseURL()
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") || strings.Contains(url, "unix") {
		return &ExitError{Code: 1, Err: errors.New("apply: the fleet's agents need the server's URL: give --server-url URL (this client reaches the server over a socket)")}
	}
	req := api.FleetApplyRequest{Spec: f, Source: file, Keys: keys, ServerURL: url, AllOrNothing: o.allOrNothing}
	plan, err := c.PlanFleet(ctx, req)
	if err != nil {
		return placeError(err, file, data)
	}
	printFleetPlan(errw, file, url, plan)
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
	fl, err := followFleet(ctx, c, out, f.Name, api.FleetProvisioning)
	if err != nil {
		return err
	}
	ready, failed := 0, 0
	for _, h := range fl.Hosts {
		switch h.State {
		case api.HostReady:
			ready++
		case api.HostFailed:
			failed++
		}
	}
	fmt.Fprintf(out, "Fleet %s: %s, %d of %d hosts ready\n", fl.Name, fl.Status, ready, len(fl.Hosts))
	if fl.Message != "" {
		fmt.Fprintf(out, "  %s\n", fl.Message)
	}
	if failed > 0 || fl.Status == api.FleetFailed {
		return &ExitError{Code: 1}
	}
	return nil
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

func printFleetPlan(w io.Writer, file, url string, p *api.FleetPlan) {
	what := "new"
	if p.Exists {
		what = "update in place"
	}
	fmt.Fprintf(w, " Configuration  %s\n Fleet          %s (%s)\n Project        %s\n Agents reach   %s\n\n", file, p.Fleet, what, p.Project, url)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, " #\tHOST\tNODE\tACTION\tWHAT")
	for i, a := range p.Actions {
		fmt.Fprintf(tw, " %d\t%s\t%s\t%s\t%s\n", i+1, a.Host, a.Node, a.Action, a.Detail)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n Install: this server's berth binary, its node credential, and the agent as a systemd unit (or, without systemd, a supervised process with a pid file).")
	fmt.Fprintln(w)
}

// followFleet prints each host's state as it changes until the fleet's
// status is no longer while; a fleet that is gone (404) ends it with nil.
func followFleet(ctx context.Context, c *client.Client, out io.Writer, name, while string) (*api.Fleet, error) {
	seen := map[string]string{}
	for {
		fl, err := c.Fleet(ctx, name)
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		for _, h := range fl.Hosts {
			line := h.State
			if h.Message != "" {
				line += ": " + h.Message
			}
			if h.State == api.HostChecked && h.OS != "" {
				line += fmt.Sprintf(" (%s/%s, %d CPUs, %s memory, %s free, GPUs: %s, docker: %v, service: %s)", h.OS, h.Arch, h.CPUs,
					spec.Bytes(h.Memory).Approx(), spec.Bytes(h.FreeDisk).Approx(), orDash(strings.Join(h.GPUs, ", ")), h.Docker, h.Service)
			}
			if seen[h.Node] != line {
				seen[h.Node] = line
				fmt.Fprintf(out, "  %-14s %-28s %s\n", h.Node, h.Host, line)
			}
		}
		for _, in := range fl.Instances {
			line := in.State
			if in.Detail != "" {
				line += ": " + in.Detail
			}
			if seen[in.Key] != line {
				seen[in.Key] = line
				fmt.Fprintf(out, "  %-22s %-10s %s\n", in.Node, in.Offer.Instance, line)
			}
		}
		if fl.Status != while {
			return fl, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(fleetPoll):
		}
	}
}

// printSSHFleets is berth fleet's second table: the SSH fleets and each
// host's state.
func printSSHFleets(w io.Writer, all []api.Fleet) error {
	var fleets, backend []api.Fleet
	for _, f := range all {
		if f.Spec != nil && f.Spec.Nodes != nil {
			backend = append(backend, f)
		} else {
			fleets = append(fleets, f)
		}
	}
	if err := printBackendFleets(w, backend); err != nil { // fleet_backend.go
		return err
	}
	if len(fleets) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SSH FLEET\tPROJECT\tSTATUS\tNODE\tHOST\tSTATE\tSERVICE\tMESSAGE")
	for _, f := range fleets {
		if len(f.Hosts) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t%s\n", f.Name, f.Project, f.Status, orDash(f.Message))
		}
		for _, h := range f.Hosts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Project, f.Status, h.Node, h.Host, h.State, orDash(h.Service), orDash(h.Message))
		}
	}
	return tw.Flush()
}

func newFleetDeleteCmd() *cobra.Command {
	var force, detach bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an SSH fleet: drain its nodes, wait for their jobs, stop and uninstall its agents",
		Long: `Delete an SSH fleet: drain each of its nodes, wait for the jobs on them to end (--force: do not
wait), then over SSH stop the agent (its systemd unit, or its supervised process), and remove its
binary, unit, pid file and files. Prints each host's progress until the fleet is gone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ctx, out := cmd.Context(), cmd.OutOrStdout()
			if _, err := c.DeleteFleet(ctx, args[0], force); err != nil {
				return err
			}
			if detach {
				fmt.Fprintf(out, "Deleting fleet %s\n", args[0])
				return nil
			}
			fl, err := followFleet(ctx, c, out, args[0], api.FleetDeleting)
			if err != nil {
				return err
			}
			if fl != nil {
				return &ExitError{Code: 1, Err: fmt.Errorf("fleet %s: %s: %s", fl.Name, fl.Status, fl.Message)}
			}
			fmt.Fprintf(out, "Fleet %s deleted\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "do not wait for the nodes' jobs; forget hosts that cannot be reached")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return at once; the server goes on")
	return cmd
}

// fleetReason is berth fleet's REASON: why a node is drained or not
// healthy, unless its STATUS says it already ("drained (REASON)").
func fleetReason(n api.Node) string {
	if n.Reason == "" || strings.HasSuffix(n.Status, "("+n.Reason+")") {
		return "-"
	}
	return n.Reason
}
