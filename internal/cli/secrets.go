package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-hq/berth/internal/client"
	"github.com/spf13/cobra"
)

func newSecretCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Set, read, list and delete the project's secrets (${{ secrets.NAME }} in a configuration)",
		Long: `Secrets are values a run needs but must not carry: a token, a registry password. A configuration
names one as ${{ secrets.NAME }} in env values, commands and registry_auth; the server puts the value
in only as it hands the job to its agent, and a job that prints it gets *** in its stored log.
Values are encrypted at rest (docs/operations.md, "Secrets"). Anyone in the project may list the
names and set a value; only who last set a secret, the project's admins or an admin may read or
delete it. A run uses the secrets of its own project.`,
	}
	var fromFile, project string
	set := &cobra.Command{
		Use:   "set NAME [VALUE]",
		Short: "Create a secret or replace its value: VALUE, --from-file F, or standard input",
		Long: `Create a secret or replace its value. The value is VALUE, or the contents of --from-file F
(as they are), or standard input (one final newline dropped: echo "$TOKEN" | berth secret set NAME).
A VALUE on the command line is seen by ps and kept in shell history: prefer the other two.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var value string
			switch {
			case len(args) == 2 && fromFile != "":
				return errors.New("secret set: give VALUE or --from-file, not both")
			case len(args) == 2:
				value = args[1]
			case fromFile != "":
				b, err := os.ReadFile(fromFile)
				if err != nil {
					return fmt.Errorf("secret set: %w", err)
				}
				value = string(b)
			default:
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("secret set: standard input: %w", err)
				}
				value = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			}
			if value == "" {
				return errors.New("secret set: the value is empty")
			}
			c, err := secretsClient(project)
			if err != nil {
				return err
			}
			if err := c.SetSecret(cmd.Context(), args[0], value); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Secret %s set; use it as ${{ secrets.%s }}\n", args[0], args[0])
			return nil
		},
	}
	set.Flags().StringVar(&fromFile, "from-file", "", "read the value from this file")
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Print a secret's value (who set it, or an admin)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := secretsClient(project)
			if err != nil {
				return err
			}
			v, err := c.Secret(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), v)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the project's secrets: names and who set them, never values",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := secretsClient(project)
			if err != nil {
				return err
			}
			xs, err := c.Secrets(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPROJECT\tSET BY\tUPDATED")
			for _, x := range xs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Name, x.Project, x.SetBy, x.UpdatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete secrets (who set each, or an admin); a waiting run that uses one fails when it starts",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := secretsClient(project)
			if err != nil {
				return err
			}
			for _, name := range args {
				if err := c.DeleteSecret(cmd.Context(), name); err != nil {
					return fmt.Errorf("delete %s: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Secret %s deleted\n", name)
			}
			return nil
		},
	}
	cmd.AddCommand(set, get, list, del)
	cmd.PersistentFlags().StringVarP(&project, "project", "P", "", "the project whose secrets these are (default: yours, main where you are a member)")
	return cmd
}

// secretsClient is the client of the secrets commands, about project.
func secretsClient(project string) (*client.Client, error) {
	c, err := newClient()
	if err != nil {
		return nil, err
	}
	return c.InProject(project), nil
}
