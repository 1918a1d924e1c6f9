package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Gateway sessions. A gateway (package trajectory/gateway) records a
// session as open when it starts and as finished, with its calls and
// reward, before it acknowledges the reward. A session still open when
// the gateway restarts was cut off by a crash: LoseOpenSessions marks it
// lost. A finished session joins a group once its group is complete and
// the group's record is appended to a file (CommitSessionGroup).
// Sessions are keyed by a digest of their id: the id is a credential and
// is never stored.

// sessionSchema is created in every store, old ones included.
// It was added within schema version 1 and touches no other table.
const sessionSchema = `
CREATE TABLE IF NOT EXISTS sessions (
	key TEXT PRIMARY KEY, grp TEXT NOT NULL, status TEXT NOT NULL,
	created INTEGER NOT NULL, grouped INTEGER NOT NULL DEFAULT 0, data BLOB);
CREATE INDEX IF NOT EXISTS sessions_grp ON sessions (grp, status, grouped);
`

// The statuses of a session.
const (
	SessionOpen     = "open"
	SessionFinished = "finished"
	SessionLost     = "lost"
)

// Session is a stored session: its key, group, status and creation time.
// Created is in Unix seconds. Once finished, it holds the caller's data.
type Session struct {
	Key, Group, Status string
	Created            int64
	Grouped            bool
	Data               []byte
}

// The statements of every gateway session and group commit, prepared
// once per store: parsing them took a third of their time.
const (
	openSessionSQL   = `INSERT INTO sessions (key, grp, status, created) VALUES (?, ?, ?, ?)`
	finishSessionSQL = `UPDATE sessions SET status = ?, data = ? WHERE key = ? AND status = ?`
	lengthSQL        = `SELECT length FROM files WHERE name = ?`
	setLengthSQL     = `INSERT INTO files (name, length) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET length = excluded.length`
)

// groupSessionsSQL marks n finished sessions grouped.
func groupSessionsSQL(n int) string {
	return `UPDATE sessions SET grouped = 1 WHERE status = ? AND grouped = 0 AND key IN (` +
		strings.TrimSuffix(strings.Repeat("?,", n), ",") + `)`
}

// preparedStmts are the prepared statements of sessions and of file
// lengths, prepared at their first use. Get them before a transaction
// begins: the store has one connection, which the transaction holds.
type preparedStmts struct {
	once                            sync.Once
	err                             error
	open, finish, length, setLength *sql.Stmt

	mu      sync.Mutex
	grouped map[int]*sql.Stmt // groupSessionsSQL by number of keys
}

// stmts prepares the statements once.
func (s *DB) stmts(ctx context.Context) (*preparedStmts, error) {
	st := &s.prepared
	st.once.Do(func() {
		// Prepared without ctx: a canceled first caller must not leave
		// the store without them.
		ctx := context.WithoutCancel(ctx)
		for _, p := range []struct {
			stmt **sql.Stmt
			sql  string
		}{{&st.open, openSessionSQL}, {&st.finish, finishSessionSQL}, {&st.length, lengthSQL}, {&st.setLength, setLengthSQL}} {
			if *p.stmt, st.err = s.db.PrepareContext(ctx, p.sql); st.err != nil {
				return
			}
		}
	})
	if st.err != nil {
		return nil, fmt.Errorf("prepare statements: %w", st.err)
	}
	return st, nil
}

// groupedStmt returns groupSessionsSQL for n keys, prepared at its first
// use. A gateway's groups are all of one size: one statement.
func (s *DB) groupedStmt(ctx context.Context, n int) (*sql.Stmt, error) {
	st := &s.prepared
	st.mu.Lock()
	defer st.mu.Unlock()
	if stmt, ok := st.grouped[n]; ok {
		return stmt, nil
	}
	stmt, err := s.db.PrepareContext(context.WithoutCancel(ctx), groupSessionsSQL(n))
	if err != nil {
		return nil, fmt.Errorf("prepare the group commit of %d sessions: %w", n, err)
	}
	if st.grouped == nil {
		st.grouped = map[int]*sql.Stmt{}
	}
	st.grouped[n] = stmt
	return stmt, nil
}

// OpenSession records a new open session. A key already stored is an
// error.
func (s *DB) OpenSession(ctx context.Context, key, group string, created int64) error {
	st, err := s.stmts(ctx)
	if err == nil {
		_, err = st.open.ExecContext(ctx, key, group, SessionOpen, created)
	}
	if err != nil {
		return fmt.Errorf("open session in %s: %w", s.path, err)
	}
	return nil
}

// FinishSession records an open session as finished with data. A session
// that is not open (unknown, finished or lost) is an error. One
// statement is atomic: it needs no transaction of its own.
func (s *DB) FinishSession(ctx context.Context, key string, data []byte) error {
	st, err := s.stmts(ctx)
	if err != nil {
		return fmt.Errorf("finish session in %s: %w", s.path, err)
	}
	res, err := st.finish.ExecContext(ctx, SessionFinished, nonNil(data), key, SessionOpen)
	if err != nil {
		return fmt.Errorf("finish session in %s: %w", s.path, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("finish session in %s: it is not open", s.path)
	}
	return nil
}

// LoseOpenSessions marks every open session lost and returns how many
// there were. A gateway calls it when it starts, before any session opens.
func (s *DB) LoseOpenSessions(ctx context.Context) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sessions SET status = ? WHERE status = ?`, SessionLost, SessionOpen)
	if err != nil {
		return 0, fmt.Errorf("mark open sessions lost in %s: %w", s.path, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("mark open sessions lost in %s: %w", s.path, err)
	}
	return int(n), nil
}

// SessionCounts returns the number of sessions by status.
func (s *DB) SessionCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM sessions GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count sessions in %s: %w", s.path, err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count sessions in %s: %w", s.path, err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count sessions in %s: %w", s.path, err)
	}
	return out, nil
}

// FinishedSessions returns the finished sessions not yet in a group
// record, oldest first.
func (s *DB) FinishedSessions(ctx context.Context) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, grp, status, created, grouped, data FROM sessions
		WHERE status = ? AND grouped = 0 ORDER BY created, rowid`, SessionFinished)
	if err != nil {
		return nil, fmt.Errorf("read finished sessions in %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var x Session
		if err := rows.Scan(&x.Key, &x.Group, &x.Status, &x.Created, &x.Grouped, &x.Data); err != nil {
			return nil, fmt.Errorf("read finished sessions in %s: %w", s.path, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read finished sessions in %s: %w", s.path, err)
	}
	return out, nil
}

// CommitSessionGroup records that the finished sessions keys make one group.
// The group's record is length bytes appended to file at offset; the file's
// new length is stored in the same transaction. A key that is not a
// finished session outside a group is an error.
func (s *DB) CommitSessionGroup(ctx context.Context, file string, offset, length int64, keys []string) error {
	st, err := s.stmts(ctx)
	if err != nil {
		return fmt.Errorf("commit session group: %w", err)
	}
	grouped, err := s.groupedStmt(ctx, len(keys))
	if err != nil {
		return fmt.Errorf("commit session group: %w", err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := setLength(ctx, tx, st, file, offset, offset+length); err != nil {
			return fmt.Errorf("commit session group: %w", err)
		}
		args := []any{SessionFinished}
		for _, k := range keys {
			args = append(args, k)
		}
		res, err := tx.StmtContext(ctx, grouped).ExecContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("commit session group: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || int(n) != len(keys) {
			return fmt.Errorf("commit session group: %d of its %d sessions are finished and ungrouped", n, len(keys))
		}
		return nil
	})
}

// SessionExpired is the status of a session that outlived its time
// before a reward ended it.
const SessionExpired = "expired"

// ExpireSession records an open session as expired. A session that is
// not open is left as it is.
func (s *DB) ExpireSession(ctx context.Context, key string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE sessions SET status = ? WHERE key = ? AND status = ?`, SessionExpired, key, SessionOpen); err != nil {
		return fmt.Errorf("expire session in %s: %w", s.path, err)
	}
	return nil
}

// Sessions returns up to limit stored sessions of every status, newest first.
// It starts at offset and also returns how many there are in all.
func (s *DB) Sessions(ctx context.Context, offset, limit int) (page []Session, total int, err error) {
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list sessions in %s: %w", s.path, err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key, grp, status, created, grouped, data FROM sessions
		ORDER BY created DESC, rowid DESC LIMIT ? OFFSET ?`, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions in %s: %w", s.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var x Session
		if err := rows.Scan(&x.Key, &x.Group, &x.Status, &x.Created, &x.Grouped, &x.Data); err != nil {
			return nil, 0, fmt.Errorf("list sessions in %s: %w", s.path, err)
		}
		page = append(page, x)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list sessions in %s: %w", s.path, err)
	}
	return page, total, nil
}

// SessionByKey returns the stored session of key; ok is false when there
// is none.
func (s *DB) SessionByKey(ctx context.Context, key string) (x Session, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT key, grp, status, created, grouped, data FROM sessions WHERE key = ?`, key).
		Scan(&x.Key, &x.Group, &x.Status, &x.Created, &x.Grouped, &x.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, fmt.Errorf("read session in %s: %w", s.path, err)
	}
	return x, true, nil
}

// SessionDropped is the status of a finished session whose group timed
// out with too few sessions to be written: it is in no group record.
const SessionDropped = "dropped"

// DropSessions records finished sessions outside a group as dropped. A
// key that is not a finished session outside a group is an error.
func (s *DB) DropSessions(ctx context.Context, keys []string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		args := []any{SessionDropped, SessionFinished}
		for _, k := range keys {
			args = append(args, k)
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET status = ? WHERE status = ? AND grouped = 0 AND key IN (`+
			strings.TrimSuffix(strings.Repeat("?,", len(keys)), ",")+`)`, args...)
		if err != nil {
			return fmt.Errorf("drop sessions: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || int(n) != len(keys) {
			return fmt.Errorf("drop sessions: %d of %d are finished and ungrouped", n, len(keys))
		}
		return nil
	})
}
