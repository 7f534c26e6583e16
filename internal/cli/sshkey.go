//go:build !slim

package cli

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
)

// `berth ssh-key add|list|remove`: the SSH public keys with which the
// server's SSH gateway (`berth server --ssh-listen`) lets you into your
// runs without a token (internal/server/sshgate.go).

func newSSHKeyCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "ssh-key", Short: "Register SSH public keys: the server's SSH gateway lets their holder into your runs (ssh -J)"}
	add := &cobra.Command{
		Use:   "add FILE.pub...",
		Short: "Register public keys (.pub files, as ssh-keygen writes them) as yours",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, path := range args {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				if strings.Contains(string(b), "PRIVATE KEY") {
					return fmt.Errorf("%s is a private key: give its public half (%s.pub); a private key never leaves your machine", path, path)
				}
				if _, _, _, _, err := ssh.ParseAuthorizedKey(b); err != nil {
					return fmt.Errorf("%s: not an SSH public key (%v): give a .pub file as ssh-keygen writes it", path, err)
				}
				k, err := c.AddSSHKey(cmd.Context(), string(b))
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Added %s key %s (%s) for user %s\n", k.Type, k.Fingerprint, orDash(k.Comment), k.User)
			}
			return nil
		},
	}
	var of string
	list := &cobra.Command{
		Use:   "list",
		Short: "List SSH keys: yours; an admin's, everyone's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			ks, err := c.SSHKeys(cmd.Context(), of)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FINGERPRINT\tTYPE\tUSER\tCOMMENT\tADDED")
			for _, k := range ks {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Fingerprint, k.Type, k.User, orDash(k.Comment), k.CreatedAt.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&of, "user", "", "only this user's keys (admins)")
	remove := &cobra.Command{
		Use:   "remove FINGERPRINT|FILE.pub...",
		Short: "Remove SSH keys, by fingerprint (berth ssh-key list) or by .pub file",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClient()
			if err != nil {
				return err
			}
			for _, arg := range args {
				fp := arg
				if !strings.HasPrefix(arg, "SHA256:") {
					b, err := os.ReadFile(arg)
					if err != nil {
						return fmt.Errorf("%s: neither a fingerprint (SHA256:…) nor a readable .pub file: %w", arg, err)
					}
					pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
					if err != nil {
						return fmt.Errorf("%s: not an SSH public key: %v", arg, err)
					}
					fp = ssh.FingerprintSHA256(pub)
				}
				if err := c.RemoveSSHKey(cmd.Context(), fp); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Removed key %s\n", fp)
			}
			return nil
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}
