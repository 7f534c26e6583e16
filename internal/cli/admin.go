//go:build !slim

package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/spec"
	"github.com/berth-hq/berth/internal/store"
)

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Operate the server's state: backups, moving it to another database",
	}
	cmd.AddCommand(newAdminBackupCmd(), newAdminMigrateStoreCmd())
	return cmd
}

func newAdminBackupCmd() *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the server's database into FILE, while the server runs",
		Long: `Copies the server's state into FILE, a new file, without stopping the server. On the server's host,
for SQLite (the default, $BERTH_HOME/server/berth.db, or --db / $BERTH_DB): one consistent snapshot,
compacted, checked (PRAGMA integrity_check) and made 0600; restore it by stopping the server and
putting it in the database's place (with no -wal or -shm file beside it). For PostgreSQL (--db
postgres://…): runs pg_dump --format=custom, which pg_restore reads.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			to := args[0]
			if db == "" {
				db = os.Getenv("BERTH_DB")
			}
			if db == "" {
				db = filepath.Join(Home(), "server", "berth.db")
			}
			kind, target, err := store.ParseLocation(db)
			if err != nil {
				return fmt.Errorf("--db: %w", err)
			}
			if kind == store.KindPostgres {
				pgDump, err := exec.LookPath("pg_dump")
				if err != nil {
					return errors.New("backup of a PostgreSQL database: pg_dump is not on PATH (install PostgreSQL's client tools, or run pg_dump --format=custom yourself)")
				}
				c := exec.CommandContext(cmd.Context(), pgDump, "--format=custom", "--file="+to, "--dbname="+target)
				c.Stdout, c.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
				if err := c.Run(); err != nil {
					return fmt.Errorf("pg_dump of %s: %w", store.Redact(db), err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Backed up %s to %s (pg_dump, custom format: pg_restore reads it)\n", store.Redact(db), to)
				return nil
			}
			size, runs, err := store.BackupSQLite(cmd.Context(), target, to)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Backed up %s to %s (%s, %d runs)\n", target, to, spec.Bytes(size).Approx(), runs)
			return nil
		},
	}
	cmd.Flags().StringVar(&db, "db", "", "the server's database: a SQLite file (default $BERTH_DB, else $BERTH_HOME/server/berth.db) or postgres://…")
	return cmd
}
