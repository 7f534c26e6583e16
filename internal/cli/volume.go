package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

// Network volumes (issue 17): `berth apply -f vol.yml` of a `type:
// volume`, `berth volume list`, `berth volume delete NAME`.

// applyVolumeFile is `berth apply -f` of a volume configuration: whether
// it exists, the confirmation, then the volume as the provider made it.
func applyVolumeFile(ctx context.Context, out, errw io.Writer, in io.Reader, file string, data []byte, yes, dryRun bool, project string) error {
	v, err := spec.ParseVolume(file, data)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	if project != "" {
		v.Project = project
	}
	c, err := newClient()
	if err != nil {
		return err
	}
	req := api.VolumeApplyRequest{Spec: v}
	plan, err := c.PlanVolume(ctx, req)
	if err != nil {
		return placeError(err, file, data)
	}
	if plan.Exists && plan.Volume != nil && plan.Volume.Status == api.VolumeActive {
		fmt.Fprintf(errw, "Volume %s exists in project %s.\n", plan.Name, plan.Project)
	} else if !plan.Exists {
		fmt.Fprintf(errw, "Volume %s does not exist yet in project %s.\n", plan.Name, plan.Project)
	}
	if dryRun {
		return nil
	}
	if !plan.Exists || plan.Volume == nil || plan.Volume.Status != api.VolumeActive {
		what := "Create"
		if v.VolumeID != "" {
			what = "Register"
		}
		if !yes && !confirm(in, errw, fmt.Sprintf("%s the volume? [y/n]: ", what)) {
			fmt.Fprintln(errw, "Nothing applied.")
			return &ExitError{Code: 1}
		}
	}
	got, err := c.ApplyVolume(ctx, req)
	if err != nil {
		return placeError(err, file, data)
	}
	printVolumes(out, []api.Volume{*got}, false, time.Now())
	if got.Status == api.VolumeFailed {
		return &ExitError{Code: 1, Err: fmt.Errorf("volume %s: %s", got.Name, got.Message)}
	}
	return nil
}

func newVolumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume",
		Short: "List and delete network volumes (dstack volume); create them with berth apply -f",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newVolumeListCmd(), newVolumeDeleteCmd())
	return cmd
}

func newVolumeListCmd() *cobra.Command {
	var (
		js, verbose bool
		project     string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the volumes of your projects",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			vs, err := c.Volumes(cmd.Context(), project)
			if err != nil {
				return err
			}
			if js {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(vs)
			}
			printVolumes(cmd.OutOrStdout(), vs, verbose, time.Now())
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&js, "json", false, "print the volumes as JSON")
	f.BoolVarP(&verbose, "verbose", "v", false, "show the region, the nodes it is attached to, the runs using it and errors")
	f.StringVar(&project, "project", "", "this project's volumes only")
	return cmd
}

func newVolumeDeleteCmd() *cobra.Command {
	var (
		yes     bool
		project string
	)
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a volume no active run uses (the provider destroys it and its data; a registered one is only forgotten)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if !yes && !confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), fmt.Sprintf("Delete the volume %s? [y/n]: ", args[0])) {
				fmt.Fprintln(cmd.ErrOrStderr(), "Nothing deleted.")
				return &ExitError{Code: 1}
			}
			if err := c.DeleteVolume(cmd.Context(), args[0], project); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Volume %s deleted\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().StringVar(&project, "project", "", "the volume's project (default: yours)")
	return cmd
}

// printVolumes writes dstack's volume table: NAME, BACKEND (with the
// region, or an instance volume's node and directory), STATUS, CREATED; verbose splits REGION out and adds ATTACHED,
// USED BY and ERROR.
func printVolumes(w io.Writer, vs []api.Volume, verbose bool, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if verbose {
		fmt.Fprintln(tw, "NAME\tPROJECT\tBACKEND\tREGION\tSIZE\tSTATUS\tATTACHED\tUSED BY\tCREATED\tERROR")
	} else {
		fmt.Fprintln(tw, "NAME\tBACKEND\tSIZE\tSTATUS\tCREATED")
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, v := range vs {
		size := "-"
		if v.Size > 0 {
			size = spec.Bytes(v.Size).String()
		}
		backend := v.Backend
		if v.Node != "" { // an instance volume: where it is
			backend += " (" + v.Node + ":" + v.Path + ")"
		}
		if verbose {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Project, backend, dash(v.Region), size, v.Status,
				dash(strings.Join(v.Attached, ", ")), dash(strings.Join(v.UsedBy, ", ")), ago(now, v.CreatedAt), dash(v.Message))
			continue
		}
		if v.Region != "" {
			backend += " (" + v.Region + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Name, backend, size, v.Status, ago(now, v.CreatedAt))
	}
	_ = tw.Flush()
}
