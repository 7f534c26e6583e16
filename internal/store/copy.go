package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// TableCount is how many rows a table had in the source and has in the
// copy.
type TableCount struct {
	Table    string
	From, To int64
}

// Copy copies every table of src into dst, a database with no rows (both
// already migrated to the same schema by their Open): one consistent
// snapshot of src (a read transaction; PostgreSQL's repeatable read) into
// one transaction on dst, then PostgreSQL's sequences set past the copied
// IDs (SQLite's AUTOINCREMENT counters likewise), then each table's rows
// counted on both sides. berth admin migrate-store calls it with no
// server on either database. Values are converted for dst's column types
// (SQLite's integers to PostgreSQL's BOOLEAN and back, text and bytes).
func Copy(ctx context.Context, dst, src Store) ([]TableCount, error) {
	s, err := sqlOf(src)
	if err != nil {
		return nil, err
	}
	d, err := sqlOf(dst)
	if err != nil {
		return nil, err
	}
	tables, err := d.tables(ctx)
	if err != nil {
		return nil, err
	}
	srcTables, err := s.tables(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(tables, srcTables) {
		return nil, fmt.Errorf("store: copy: the two databases hold different tables (%v, %v): is one from another release?", srcTables, tables)
	}
	stx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: s.snapshotLevel()})
	if err != nil {
		return nil, fmt.Errorf("store: copy: %w", err)
	}
	defer stx.Rollback()
	dtx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: copy: %w", err)
	}
	defer dtx.Rollback()
	var counts []TableCount
	for _, t := range tables {
		// The migrations' own rows (leadership's) give way to the source's.
		if t == "leadership" {
			if _, err := dtx.ExecContext(ctx, `DELETE FROM leadership`); err != nil {
				return nil, fmt.Errorf("store: copy: %w", err)
			}
		}
		var n int64
		if err := dtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("store: copy: %s: %w", t, err)
		}
		if n > 0 {
			return nil, fmt.Errorf("store: copy: the destination is not empty: its table %s has %d rows (copy into a new database)", t, n)
		}
		cols, err := d.columns(ctx, t)
		if err != nil {
			return nil, err
		}
		rows, err := s.copyTable(ctx, stx, dtx, d, t, cols)
		if err != nil {
			return nil, err
		}
		counts = append(counts, TableCount{Table: t, From: rows})
	}
	if err := d.resetSequences(ctx, dtx); err != nil {
		return nil, err
	}
	if err := dtx.Commit(); err != nil {
		return nil, fmt.Errorf("store: copy: commit: %w", err)
	}
	// Verified after the commit: what the destination holds now.
	var bad []string
	for i, c := range counts {
		if err := d.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+c.Table).Scan(&counts[i].To); err != nil {
			return counts, fmt.Errorf("store: copy: count %s: %w", c.Table, err)
		}
		if counts[i].To != c.From {
			bad = append(bad, fmt.Sprintf("%s: %d rows copied, %d there", c.Table, c.From, counts[i].To))
		}
	}
	if len(bad) > 0 {
		return counts, fmt.Errorf("store: copy: the counts differ: %s", strings.Join(bad, "; "))
	}
	return counts, nil
}

func sqlOf(st Store) (*sqlDB, error) {
	switch s := st.(type) {
	case *SQLite:
		return &s.sqlDB, nil
	case *Postgres:
		return &s.sqlDB, nil
	}
	return nil, fmt.Errorf("store: copy: %T is not a database", st)
}

func (s *sqlDB) postgres() bool { return s.d.dollar }

// snapshotLevel is the isolation of the copy's reads: one snapshot.
func (s *sqlDB) snapshotLevel() sql.IsolationLevel {
	if s.postgres() {
		return sql.LevelRepeatableRead
	}
	return sql.LevelDefault // a SQLite read transaction is a snapshot (WAL)
}

// tables lists the database's tables in the order they are copied:
// those others refer to first (users, projects, runs), then by name.
func (s *sqlDB) tables(ctx context.Context) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if s.postgres() {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	}
	rows, err := s.r.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: copy: tables: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		if t != "goose_db_version" {
			out = append(out, t)
		}
	}
	first := map[string]int{"users": 0, "projects": 1, "runs": 2}
	slices.SortFunc(out, func(a, b string) int {
		fa, oka := first[a]
		fb, okb := first[b]
		switch {
		case oka && okb:
			return fa - fb
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out, rows.Err()
}

// column is one of a table's columns and its type in this database.
type column struct{ name, typ string }

func (s *sqlDB) columns(ctx context.Context, table string) ([]column, error) {
	q := `SELECT name, lower(type) FROM pragma_table_info(?) ORDER BY cid`
	if s.postgres() {
		q = `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`
	}
	rows, err := s.r.QueryContext(ctx, q, table)
	if err != nil {
		return nil, fmt.Errorf("store: copy: columns of %s: %w", table, err)
	}
	defer rows.Close()
	var cols []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 && rows.Err() == nil {
		return nil, fmt.Errorf("store: copy: table %s has no columns", table)
	}
	return cols, rows.Err()
}

// copyTable copies one table's rows from the source's snapshot into the
// destination's transaction; it returns how many.
func (s *sqlDB) copyTable(ctx context.Context, stx, dtx *sql.Tx, d *sqlDB, table string, cols []column) (int64, error) {
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
		marks[i] = "?"
	}
	list := strings.Join(names, ", ")
	rows, err := stx.QueryContext(ctx, `SELECT `+list+` FROM `+table)
	if err != nil {
		return 0, fmt.Errorf("store: copy: read %s: %w", table, err)
	}
	defer rows.Close()
	ins, err := dtx.PrepareContext(ctx, d.q(`INSERT INTO `+table+` (`+list+`) VALUES (`+strings.Join(marks, ", ")+`)`))
	if err != nil {
		return 0, fmt.Errorf("store: copy: %s: %w", table, err)
	}
	defer ins.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, fmt.Errorf("store: copy: read %s: %w", table, err)
		}
		for i, c := range cols {
			vals[i] = convert(vals[i], c.typ)
		}
		if _, err := ins.ExecContext(ctx, vals...); err != nil {
			return n, fmt.Errorf("store: copy: write %s: %w", table, err)
		}
		n++
	}
	return n, rows.Err()
}

// convert makes v fit a destination column of type typ.
func convert(v any, typ string) any {
	switch x := v.(type) {
	case int64:
		if typ == "boolean" {
			return x != 0
		}
	case bool:
		if typ != "boolean" {
			if x {
				return int64(1)
			}
			return int64(0)
		}
	case []byte:
		if typ == "text" || strings.HasPrefix(typ, "character") {
			return string(x)
		}
	case string:
		if typ == "bytea" || typ == "blob" {
			return []byte(x)
		}
	}
	return v
}

// resetSequences sets the counters of generated IDs past the copied ones:
// PostgreSQL's sequences (setval), SQLite's AUTOINCREMENT (sqlite_sequence).
func (s *sqlDB) resetSequences(ctx context.Context, tx *sql.Tx) error {
	if !s.postgres() {
		// sqlite_sequence exists once a table has AUTOINCREMENT; its
		// counter must not lag behind the copied IDs.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name = 'sqlite_sequence'`).Scan(&n); err != nil || n == 0 {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%AUTOINCREMENT%'`)
		if err != nil {
			return fmt.Errorf("store: copy: sequences: %w", err)
		}
		var tables []string
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return err
			}
			tables = append(tables, t)
		}
		rows.Close()
		for _, t := range tables {
			if _, err := tx.ExecContext(ctx, `DELETE FROM sqlite_sequence WHERE name = ?`, t); err != nil {
				return fmt.Errorf("store: copy: sequences: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO sqlite_sequence (name, seq) SELECT ?, COALESCE(MAX(rowid), 0) FROM `+t, t); err != nil {
				return fmt.Errorf("store: copy: sequences: %w", err)
			}
		}
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_default LIKE 'nextval(%'`)
	if err != nil {
		return fmt.Errorf("store: copy: sequences: %w", err)
	}
	type seq struct{ table, col string }
	var seqs []seq
	for rows.Next() {
		var q seq
		if err := rows.Scan(&q.table, &q.col); err != nil {
			rows.Close()
			return err
		}
		seqs = append(seqs, q)
	}
	rows.Close()
	for _, q := range seqs {
		// setval(seq, max, true): the next ID is max+1; an empty table's
		// sequence starts at 1 (setval(seq, 1, false)).
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(MAX(%s), 1), MAX(%s) IS NOT NULL) FROM %s`, q.col, q.col, q.table),
			q.table, q.col); err != nil {
			return fmt.Errorf("store: copy: sequence of %s.%s: %w", q.table, q.col, err)
		}
	}
	return nil
}
