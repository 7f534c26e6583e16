//go:build !slim

package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/store"
)

func newAdminMigrateStoreCmd() *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "migrate-store --from LOCATION --to LOCATION",
		Short: "Copy the server's state from one database to another (SQLite to PostgreSQL, or back)",
		Long: `Copies every table of the --from database into the --to database, which must have no rows (a new
SQLite file, or an empty PostgreSQL database): one consistent snapshot of the source, written in
one transaction, PostgreSQL's sequences then set past the copied IDs, and each table's rows counted
on both sides. Each location is a SQLite file (a path or sqlite:PATH) or postgres://…. Stop the
server first: the command refuses a database a server holds (and holds both while it copies).
Both are brought to this release's schema first. Then start the server with --db set to the copy;
the secrets key (BERTH_SECRETS_KEY or secrets.key) must go with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return errors.New("migrate-store: --from and --to are required")
			}
			ctx := cmd.Context()
			src, closeSrc, err := openStoreForCopy(ctx, from, "--from")
			if err != nil {
				return err
			}
			defer closeSrc()
			dst, closeDst, err := openStoreForCopy(ctx, to, "--to")
			if err != nil {
				return err
			}
			defer closeDst()
			counts, err := store.Copy(ctx, dst, src)
			if err != nil {
				return err
			}
			var rows int64
			for _, c := range counts {
				rows += c.To
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Copied %s to %s: %d tables, %d rows, counts verified\n", store.Redact(from), store.Redact(to), len(counts), rows)
			for _, c := range counts {
				if c.To > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "  %-20s %d\n", c.Table, c.To)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the database to copy: a SQLite file (a path or sqlite:PATH) or postgres://…")
	cmd.Flags().StringVar(&to, "to", "", "the database to copy into, with no rows: a new SQLite file or an empty PostgreSQL database")
	return cmd
}

// openStoreForCopy opens loc holding the lock a server takes on it (the
// SQLite file's directory lock, PostgreSQL's advisory lock): a database a
// server holds is refused, and none starts on it during the copy.
func openStoreForCopy(ctx context.Context, loc, flag string) (store.Store, func(), error) {
	kind, target, err := store.ParseLocation(loc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", flag, err)
	}
	if kind == store.KindPostgres {
		st, err := store.OpenPostgres(ctx, target, store.PostgresOptions{Exclusive: true})
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w (stop the server first)", flag, store.Redact(loc), err)
		}
		return st, func() { st.Close() }, nil
	}
	unlock, err := lockDir(filepath.Dir(target), "server")
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w (stop the server first)", flag, loc, err)
	}
	st, err := store.OpenSQLite(ctx, target, store.SQLiteOptions{})
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("%s: %w", flag, err)
	}
	return st, func() { st.Close(); unlock() }, nil
}
