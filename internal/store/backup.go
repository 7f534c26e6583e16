package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// BackupSQLite copies the SQLite database at path into a new file to, while
// a server may be using it: SQLite's VACUUM INTO reads one consistent
// snapshot (WAL lets it run beside the writer) and writes a compact copy,
// itself a database a server can open. to must not exist. It answers the
// copy's size and how many runs it holds.
func BackupSQLite(ctx context.Context, path, to string) (size, runs int64, err error) {
	if _, err := os.Stat(path); err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	if _, err := os.Stat(to); err == nil {
		return 0, 0, fmt.Errorf("store: %s exists: a backup goes to a new file", to)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+dsnPath(path)+"?"+q.Encode())
	if err != nil {
		return 0, 0, fmt.Errorf("store: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// The copy holds every run's configuration and the tokens' hashes: it
	// is written in a directory of its own, 0700, made 0600, then moved.
	dir, err := os.MkdirTemp(filepath.Dir(to), ".berth-backup-")
	if err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "berth.db")
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return 0, 0, fmt.Errorf("store: back up %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	if err := os.Rename(tmp, to); err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	fi, err := os.Stat(to)
	if err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	c, err := sql.Open("sqlite", "file:"+dsnPath(to)+"?mode=ro")
	if err != nil {
		return 0, 0, fmt.Errorf("store: open %s: %w", to, err)
	}
	defer c.Close()
	var check string
	if err := c.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		return 0, 0, fmt.Errorf("store: the copy %s fails its integrity check: %s %v", to, check, err)
	}
	if err := c.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs`).Scan(&runs); err != nil {
		return 0, 0, fmt.Errorf("store: the copy %s: %w", to, err)
	}
	return fi.Size(), runs, nil
}
