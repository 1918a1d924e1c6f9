package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

// Run state. A `process` run appends records to files of an output
// directory. With each record's bookkeeping, in the same transaction, it
// stores the length the file had after that record. A file longer than its
// recorded length ends with work written but never recorded, as when a
// process is killed mid-write. The caller truncates it back to the recorded
// length and redoes that work.

// Rollout is the state of one finished rollout.
// It holds its place in the run, where its record was written, and the
// caller's result data, which this package does not read.
type Rollout struct {
	Item, Group, Index int
	ID                 string
	Offset, Length     int64 // the record's bytes in its file
	Data               []byte
}

// Group is the state of one finished group.
// Its status is "written" or the reason it was dropped. It holds where its
// record was written, with Length 0 when it was not, and the caller's data.
type Group struct {
	Item, Group    int
	Status         string
	Offset, Length int64
	Data           []byte
}

// Identity returns the identity of the run stored in the database, or ok
// false when none was stored yet.
func (s *DB) Identity(ctx context.Context) (identity []byte, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT identity FROM run WHERE id = 1`).Scan(&identity)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read run identity: %w", err)
	}
	return identity, true, nil
}

// SetIdentity stores the identity of the run. A database that already
// holds a different identity is an error: the caller compares first and
// names the difference.
func (s *DB) SetIdentity(ctx context.Context, identity []byte) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var old []byte
		err := tx.QueryRowContext(ctx, `SELECT identity FROM run WHERE id = 1`).Scan(&old)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, `INSERT INTO run (id, identity) VALUES (1, ?)`, identity); err != nil {
				return fmt.Errorf("write run identity: %w", err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("read run identity: %w", err)
		case !bytes.Equal(old, identity):
			return errors.New("write run identity: the store holds another run")
		}
		return nil
	})
}

// FileLengths returns the recorded length of every file of the run.
func (s *DB) FileLengths(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, length FROM files`)
	if err != nil {
		return nil, fmt.Errorf("read file lengths: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, fmt.Errorf("read file lengths: %w", err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read file lengths: %w", err)
	}
	return out, nil
}

// Baseline returns the stored baseline data of a group, or ok false.
func (s *DB) Baseline(ctx context.Context, item, group int) (data []byte, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT data FROM baselines WHERE item = ? AND grp = ?`, item, group).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read baseline of item %d group %d: %w", item, group, err)
	}
	return data, true, nil
}

// EachBaseline calls fn with every stored baseline, by item and group, in one query.
// An error from fn stops the walk and is returned. fn must not use s: the
// walk holds a connection.
func (s *DB) EachBaseline(ctx context.Context, fn func(item, group int, data []byte) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT item, grp, data FROM baselines ORDER BY item, grp`)
	if err != nil {
		return fmt.Errorf("read baselines: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var item, group int
		var data []byte
		if err := rows.Scan(&item, &group, &data); err != nil {
			return fmt.Errorf("read baselines: %w", err)
		}
		if err := fn(item, group, data); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read baselines: %w", err)
	}
	return nil
}

// PutBaseline stores the baseline data of a group.
// A resumed run then scores the rest of the group against the same baseline.
func (s *DB) PutBaseline(ctx context.Context, item, group int, data []byte) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO baselines (item, grp, data) VALUES (?, ?, ?)`, item, group, nonNil(data))
		if err != nil {
			return fmt.Errorf("write baseline of item %d group %d: %w", item, group, err)
		}
		return nil
	})
}

// setLength records a file's length after a record ended at end. The
// record must start where the file's recorded length was: that is what makes
// the files append-only and the state exact. It runs st's statements in tx.
func setLength(ctx context.Context, tx *sql.Tx, st *preparedStmts, file string, offset, end int64) error {
	var cur int64
	err := tx.StmtContext(ctx, st.length).QueryRowContext(ctx, file).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read length of %s: %w", file, err)
	}
	if offset != cur {
		return fmt.Errorf("record of %s at offset %d, but the recorded length is %d", file, offset, cur)
	}
	if _, err := tx.StmtContext(ctx, st.setLength).ExecContext(ctx, file, end); err != nil {
		return fmt.Errorf("write length of %s: %w", file, err)
	}
	return nil
}

// CommitRollout records a finished rollout whose record was appended to file.
// The record is r.Length bytes at r.Offset; the file's new length is stored
// in the same transaction. A rollout already recorded, at the same place or
// with the same ID, is an error.
func (s *DB) CommitRollout(ctx context.Context, file string, r Rollout) error {
	st, err := s.stmts(ctx)
	if err != nil {
		return fmt.Errorf("commit rollout %s: %w", r.ID, err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := setLength(ctx, tx, st, file, r.Offset, r.Offset+r.Length); err != nil {
			return fmt.Errorf("commit rollout %s: %w", r.ID, err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO rollouts (item, grp, idx, id, file_offset, file_length, data)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.Item, r.Group, r.Index, r.ID, r.Offset, r.Length, nonNil(r.Data))
		if err != nil {
			return fmt.Errorf("commit rollout %s: %w", r.ID, err)
		}
		return nil
	})
}

// CommitGroup records a finished group. When g.Length > 0 its record was
// appended to file at g.Offset, and the file's new length is recorded in the
// same transaction. A dropped group has no record: Length is 0 and file is
// ignored.
func (s *DB) CommitGroup(ctx context.Context, file string, g Group) error {
	st, err := s.stmts(ctx)
	if err != nil {
		return fmt.Errorf("commit group %d/%d: %w", g.Item, g.Group, err)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if g.Length > 0 {
			if err := setLength(ctx, tx, st, file, g.Offset, g.Offset+g.Length); err != nil {
				return fmt.Errorf("commit group %d/%d: %w", g.Item, g.Group, err)
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO groups (item, grp, status, file_offset, file_length, data)
			VALUES (?, ?, ?, ?, ?, ?)`, g.Item, g.Group, g.Status, g.Offset, g.Length, nonNil(g.Data))
		if err != nil {
			return fmt.Errorf("commit group %d/%d: %w", g.Item, g.Group, err)
		}
		return nil
	})
}

// Rollouts returns every recorded rollout, ordered by item, group, index.
func (s *DB) Rollouts(ctx context.Context) ([]Rollout, error) {
	var out []Rollout
	err := s.EachRollout(ctx, func(r Rollout) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// EachRollout calls fn with every recorded rollout, by item, group and index.
// It holds one in memory at a time. An error from fn stops the walk and is
// returned. fn must not use s: the walk holds a connection.
func (s *DB) EachRollout(ctx context.Context, fn func(Rollout) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT item, grp, idx, id, file_offset, file_length, data
		FROM rollouts ORDER BY item, grp, idx`)
	if err != nil {
		return fmt.Errorf("read rollouts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r Rollout
		if err := rows.Scan(&r.Item, &r.Group, &r.Index, &r.ID, &r.Offset, &r.Length, &r.Data); err != nil {
			return fmt.Errorf("read rollouts: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rollouts: %w", err)
	}
	return nil
}

// Groups returns every recorded group, ordered by item and group.
func (s *DB) Groups(ctx context.Context) ([]Group, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT item, grp, status, file_offset, file_length, data
		FROM groups ORDER BY item, grp`)
	if err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		var g Group
		if err := rows.Scan(&g.Item, &g.Group, &g.Status, &g.Offset, &g.Length, &g.Data); err != nil {
			return nil, fmt.Errorf("read groups: %w", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read groups: %w", err)
	}
	return out, nil
}

// RunID returns the run's random identifier, made and stored on first use.
// Unlike the identity, it tells apart two runs with the same settings, so
// their groups' ids differ in a shared trajectory API.
func (s *DB) RunID(ctx context.Context) (string, error) {
	var id string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'run_id'`).Scan(&id)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		id = hex.EncodeToString(b[:])
		_, err = tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('run_id', ?)`, id)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("run id: %w", err)
	}
	return id, nil
}

// MarkSent records that a written group was handed on (to a trajectory
// API, by process --push). Marking a group twice is not an error.
func (s *DB) MarkSent(ctx context.Context, item, group int) error {
	_, err := s.db.ExecContext(ctx, `INSERT OR IGNORE INTO sent (item, grp) VALUES (?, ?)`, item, group)
	if err != nil {
		return fmt.Errorf("mark group %d/%d sent: %w", item, group, err)
	}
	return nil
}

// Sent returns the groups MarkSent recorded, keyed by {item, group}.
func (s *DB) Sent(ctx context.Context) (map[[2]int]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT item, grp FROM sent`)
	if err != nil {
		return nil, fmt.Errorf("read sent groups: %w", err)
	}
	defer rows.Close()
	out := map[[2]int]bool{}
	for rows.Next() {
		var k [2]int
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, fmt.Errorf("read sent groups: %w", err)
		}
		out[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sent groups: %w", err)
	}
	return out, nil
}

// nonNil maps nil to an empty slice: the driver stores nil as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
