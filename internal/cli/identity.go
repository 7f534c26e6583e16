package cli

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
)

// berth user, berth token, berth login, berth node token: identity.

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Create, list and delete Berth users (admin)"}
	var admin bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user (berth token create --user NAME gives them a token)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), api.UserRequest{Name: args[0], Admin: admin})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "User %s created%s\n", u.Name, map[bool]string{true: " (admin)"}[u.Admin])
			return nil
		},
	}
	create.Flags().BoolVar(&admin, "admin", false, "the user administers the server (users, nodes, policy)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the users",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			us, err := c.Users(cmd.Context())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tADMIN\tCREATED")
			for _, u := range us {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, map[bool]string{true: "yes", false: "no"}[u.Admin], u.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a user: their tokens stop working; their runs keep their name",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			if err := c.DeleteUser(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "User %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, del)
	return cmd
}

// parseExpiry reads --expires: a Go duration (90m, 12h) or days (30d); ""
// or 0 is never.
func parseExpiry(s string) (int64, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("--expires %q: want a duration such as 12h or 30d", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("--expires %q: want a duration such as 12h or 30d", s)
		}
	}
	if d < time.Second {
		return 0, fmt.Errorf("--expires %q: at least a second", s)
	}
	return int64(d / time.Second), nil
}

func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke API tokens (your own; an admin's: anyone's)"}
	var user, name, expires string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token, shown this once (the server keeps only its hash)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secs, err := parseExpiry(expires)
			if err != nil {
				return err
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), api.TokenRequest{User: user, Name: name, ExpiresIn: secs})
			if err != nil {
				return err
			}
			printCreatedToken(cmd.OutOrStdout(), cmd.ErrOrStderr(), t)
			return nil
		},
	}
	create.Flags().StringVar(&user, "user", "", "whose token (default: yours; another user's takes an admin)")
	create.Flags().StringVar(&name, "name", "", "a name to tell it by in berth token list")
	create.Flags().StringVar(&expires, "expires", "", "how long it works, e.g. 12h or 90d (default: until revoked)")
	var of string
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets): yours; an admin's, every user's and node's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ts, err := c.Tokens(cmd.Context(), of)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tFOR\tNAME\tCREATED\tEXPIRES")
			for _, t := range ts {
				who := t.User
				if t.Node != "" {
					who = "node " + t.Node
					if t.AssertUsers {
						who += " (asserts users)"
					}
				}
				exp := "never"
				if t.ExpiresAt != nil {
					exp = t.ExpiresAt.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, who, orDash(t.Name), t.CreatedAt.Local().Format(time.DateTime), exp)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&of, "user", "", "only this user's tokens")
	revoke := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke tokens by ID: they stop working within seconds",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.RevokeToken(cmd.Context(), id); err != nil {
					return fmt.Errorf("revoke %s: %w", id, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Token %s revoked\n", id)
			}
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// printCreatedToken shows a new token's secret on stdout (alone, for
// scripts: TOKEN=$(berth token create)) and what it is on stderr.
func printCreatedToken(out, errw io.Writer, t *api.Token) {
	who := "user " + t.User
	if t.Node != "" {
		who = "node " + t.Node
	}
	exp := ""
	if t.ExpiresAt != nil {
		exp = ", expires " + t.ExpiresAt.Local().Format(time.DateTime)
	}
	fmt.Fprintf(errw, "Token %s for %s%s (shown once: keep it now)\n", t.ID, who, exp)
	fmt.Fprintln(out, t.Secret)
}

// nodeTokenCmd is `berth node token create NODE`.
func nodeTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Credentials of nodes' agents (admin)"}
	var name, expires string
	var assert bool
	create := &cobra.Command{
		Use:   "create NODE",
		Short: "Create the credential an agent runs with (BERTH_TOKEN=… berth agent --name NODE): it acts only as NODE",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			secs, err := parseExpiry(expires)
			if err != nil {
				return err
			}
			c, err := newClient()
			if err != nil {
				return err
			}
			t, err := c.CreateNodeToken(cmd.Context(), args[0], api.NodeTokenRequest{Name: name, AssertUsers: assert, ExpiresIn: secs})
			if err != nil {
				return err
			}
			printCreatedToken(cmd.OutOrStdout(), cmd.ErrOrStderr(), t)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "", "a name to tell it by in berth token list")
	create.Flags().StringVar(&expires, "expires", "", "how long it works, e.g. 90d (default: until revoked)")
	create.Flags().BoolVar(&assert, "assert-users", false, "the node's agent vouches for its host's Unix users on its local socket (their requests need no token)")
	cmd.AddCommand(create)
	return cmd
}

func newLoginCmd() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "login URL",
		Short: "Check a token against the server at URL and keep both in the client configuration ($BERTH_HOME/config.yml)",
		Long: `Check a token against the server at URL and write the client configuration ($BERTH_HOME/config.yml,
0600), so that the commands need no BERTH_URL or BERTH_TOKEN. Without --token, the token is read
from standard input (berth token create prints one).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := strings.TrimRight(args[0], "/")
			if token == "" {
				fmt.Fprint(cmd.ErrOrStderr(), "Token: ")
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && line == "" {
					return fmt.Errorf("login: no token on standard input")
				}
				token = strings.TrimSpace(line)
			}
			if token == "" {
				return fmt.Errorf("login: no token (--token, or on standard input)")
			}
			w, err := client.New(url, token).WhoAmI(cmd.Context())
			if err != nil {
				return fmt.Errorf("login to %s: %w", url, err)
			}
			if w.Kind != "user" {
				return fmt.Errorf("login to %s: that is a %s's credential, not a user's", url, w.Kind)
			}
			c, err := readClientConfig(configPath())
			if err != nil {
				c = ClientConfig{}
			}
			c.URL, c.Token = url, token
			if err := writeClientConfig(configPath(), c); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s (%s)\n", url, w.User, configPath())
			return nil
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the token (default: read from standard input; a flag shows in ps)")
	return cmd
}
