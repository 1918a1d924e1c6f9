// Package store is the project's embedded SQLite database.
// It holds a gateway's sessions and the state of a `delegate process` run,
// so that the run can resume. It also caches responses to temperature-0 and
// seeded requests. It uses modernc.org/sqlite, a pure-Go driver, in WAL
// mode. A DB may be used from many goroutines at once, and every state
// change is one transaction. The schema's version is in the meta table;
// opening a database of another version is an error naming both.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// SchemaVersion is the version of the tables this build reads and writes.
const SchemaVersion = 1

// DB is an open store. Close it when done.
type DB struct {
	db       *sql.DB
	path     string
	prepared preparedStmts
}

const schema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run (id INTEGER PRIMARY KEY CHECK (id = 1), identity BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, length INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS baselines (item INTEGER NOT NULL, grp INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (item, grp));
CREATE TABLE IF NOT EXISTS rollouts (
	item INTEGER NOT NULL, grp INTEGER NOT NULL, idx INTEGER NOT NULL,
	id TEXT NOT NULL UNIQUE, file_offset INTEGER NOT NULL, file_length INTEGER NOT NULL,
	data BLOB NOT NULL, PRIMARY KEY (item, grp, idx));
CREATE TABLE IF NOT EXISTS groups (
	item INTEGER NOT NULL, grp INTEGER NOT NULL, status TEXT NOT NULL,
	file_offset INTEGER NOT NULL, file_length INTEGER NOT NULL,
	data BLOB NOT NULL, PRIMARY KEY (item, grp));
CREATE TABLE IF NOT EXISTS sent (item INTEGER NOT NULL, grp INTEGER NOT NULL, PRIMARY KEY (item, grp));
CREATE TABLE IF NOT EXISTS responses (
	key TEXT PRIMARY KEY, scope TEXT NOT NULL, model TEXT NOT NULL,
	data BLOB NOT NULL, created INTEGER NOT NULL);
`

// Open opens the database at path, creating it with the current schema if needed.
// Any number of processes may use it at once, as they do a shared response
// cache. A database of another schema version is an error naming both
// versions.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, false, 10*time.Second)
}

// OpenWithin is Open that waits at most wait for a lock another process holds.
// A reader that must answer at once uses it, for instance beside a running
// gateway.
func OpenWithin(ctx context.Context, path string, wait time.Duration) (*DB, error) {
	return open(ctx, path, false, wait)
}

// OpenExclusive is Open for one process only: it holds the lock until Close.
// A second process opening the same file then fails instead of interleaving
// its writes, as a second `process` run on one output directory would.
func OpenExclusive(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, true, time.Second)
}

func open(ctx context.Context, path string, exclusive bool, busy time.Duration) (*DB, error) {
	q := url.Values{}
	if exclusive {
		// Before journal_mode: WAL then keeps its index in process memory.
		q.Add("_pragma", "locking_mode(EXCLUSIVE)")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// One connection: writers queue in Go instead of meeting SQLITE_BUSY,
	// and the load (a few statements per rollout or cached call) is light.
	db.SetMaxOpenConns(1)
	s := &DB{db: db, path: path}
	if err := s.init(ctx); err != nil {
		// The init error is what matters; a close failure adds nothing.
		_ = db.Close()
		var se *sqlite.Error
		if exclusive && errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY {
			return nil, fmt.Errorf("open store %s: another process holds it: %w", path, err)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

func (s *DB) init(ctx context.Context) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
			return fmt.Errorf("create meta: %w", err)
		}
		var v string
		err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'schema_version'`).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, schema); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('schema_version', ?)`, strconv.Itoa(SchemaVersion)); err != nil {
				return fmt.Errorf("write schema version: %w", err)
			}
			if _, err := tx.ExecContext(ctx, sessionSchema); err != nil {
				return fmt.Errorf("create sessions: %w", err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("read schema version: %w", err)
		}
		got, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("schema version %q is not a number", v)
		}
		if got != SchemaVersion {
			return fmt.Errorf("schema version %d, this build reads version %d: use a build of the matching version or start a new file", got, SchemaVersion)
		}
		// The table of groups sent on was added within this version: a
		// store written before it gains it, empty.
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sent (item INTEGER NOT NULL, grp INTEGER NOT NULL, PRIMARY KEY (item, grp))`); err != nil {
			return fmt.Errorf("create sent: %w", err)
		}
		if _, err := tx.ExecContext(ctx, sessionSchema); err != nil {
			return fmt.Errorf("create sessions: %w", err)
		}
		return nil
	})
}

// Path returns the file the store was opened from.
func (s *DB) Path() string { return s.path }

// Close closes the database.
func (s *DB) Close() error {
	// Closing the database closes its prepared statements too.
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// tx runs fn in one transaction, committed when fn returns nil.
func (s *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		// The transaction failed already; its rollback error adds nothing.
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
