//go:build !slim

package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// berth project: projects (Slurm's accounts) and their members.

func newProjectCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "project", Short: "Create, list and delete projects, and manage their members (roles: admin, manager, user)"}
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a project (admin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			p, err := c.CreateProject(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Project %s created (berth project member add --project %s USER)\n", p.Name, p.Name)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List your projects (every one, for an admin) and your role in each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ps, err := c.Projects(cmd.Context(), false)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tDEFAULT\tCREATED")
			for _, p := range ps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, orStr(p.Role, "-"), map[bool]string{true: "yes", false: "no"}[p.Default],
					p.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a project with no active runs (admin); its runs' history stays",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if err := c.DeleteProject(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Project %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, del, newMemberCmd())
	return cmd
}

func newMemberCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "member", Short: "Add, remove and list a project's members (its admins and managers)"}
	var project, role string
	add := &cobra.Command{
		Use:   "add --project P USER [--role admin|manager|user]",
		Short: "Make a user a member of a project, or change their role",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			m, err := c.SetMember(cmd.Context(), project, args[0], role)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is a member of %s (%s)\n", m.User, m.Project, m.Role)
			return nil
		},
	}
	add.Flags().StringVar(&role, "role", "user", "admin (members, fleets, settings), manager (members) or user (runs, secrets)")
	remove := &cobra.Command{
		Use:   "remove --project P USER",
		Short: "End a user's membership of a project (their runs stay theirs)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if err := c.RemoveMember(cmd.Context(), project, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is no longer a member of %s\n", args[0], project)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list --project P",
		Short: "List a project's members and their roles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ms, err := c.Members(cmd.Context(), project)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tROLE\tSINCE")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", m.User, m.Role, m.Since.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	for _, c := range []*cobra.Command{add, remove, list} {
		c.Flags().StringVarP(&project, "project", "p", "", "the project (required)")
		_ = c.MarkFlagRequired("project")
	}
	cmd.AddCommand(add, remove, list)
	return cmd
}
