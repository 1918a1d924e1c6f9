package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate/rollout"
)

// PushedFile holds the length of GroupsFile already sent to Config.Sink.
const PushedFile = "pushed"

// pushRetry bounds the wait between two tries of a group the sink failed
// to take.
const pushRetry = 30 * time.Second

// pusher sends the committed group records to the sink in file order,
// reading each back from the group file. It starts at the length
// PushedFile records, so that a restart sends what the last run did not.
// A send that fails is tried again, waiting up to pushRetry between
// tries; the API deduplicates a group sent twice by its id.
func (g *Gateway) pusher(ctx context.Context) {
	defer close(g.pushDone)
	sent, err := g.readPushed()
	if err != nil {
		g.log.Error("push: groups are not sent", "err", err)
		return
	}
	wait := time.Duration(0)
	for {
		g.gmu.Lock()
		size := g.size
		g.gmu.Unlock()
		if sent == size {
			select {
			case <-g.pushKick:
				continue
			case <-ctx.Done():
				return
			}
		}
		n, err := g.pushFrom(ctx, sent, size)
		sent += n
		if err == nil {
			wait = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait = min(max(2*wait, time.Second), pushRetry)
		g.log.Error("push a group record", "err", err, "retry_in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// pushFrom sends the records of the group file between offsets from and
// to, recording each sent one in PushedFile. It returns the bytes sent.
func (g *Gateway) pushFrom(ctx context.Context, from, to int64) (int64, error) {
	r := bufio.NewReader(io.NewSectionReader(g.groups, from, to-from))
	var done int64
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return done, nil
		}
		if err != nil {
			return done, fmt.Errorf("read %s at %d: %w", GroupsFile, from+done, err)
		}
		var rec rollout.GroupRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return done, fmt.Errorf("decode %s at %d: %w", GroupsFile, from+done, err)
		}
		if why := noTokens(&rec); why != "" {
			// A trainer cannot use it, now or at a retry.
			g.log.Warn("push: a group record without token ids is not sent", "group", rec.ID, "why", why)
		} else if err := g.cfg.Sink.Send(ctx, &rec); err != nil {
			return done, fmt.Errorf("send group %s: %w", rec.ID, err)
		} else {
			g.pushed.Add(1)
		}
		done += int64(len(line))
		if err := g.writePushed(from + done); err != nil {
			return done, err
		}
	}
}

// noTokens says why a record has a sequence without token ids, "" when
// every one has them.
func noTokens(rec *rollout.GroupRecord) string {
	for i, t := range rec.Tokens {
		if len(t) > 0 {
			continue
		}
		if i < len(rec.NoTokens) && rec.NoTokens[i] != "" {
			return rec.NoTokens[i]
		}
		return "no token ids"
	}
	return ""
}

// readPushed returns the length of the group file sent, 0 when nothing
// was.
func (g *Gateway) readPushed() (int64, error) {
	b, err := os.ReadFile(filepath.Join(g.cfg.Dir, PushedFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", PushedFile, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s holds %q, not a length", filepath.Join(g.cfg.Dir, PushedFile), b)
	}
	g.gmu.Lock()
	size := g.size
	g.gmu.Unlock()
	if n > size {
		// The sent length only grows with committed records.
		return 0, fmt.Errorf("%s says %d bytes were sent, but %s holds %d", PushedFile, n, GroupsFile, size)
	}
	return n, nil
}

// writePushed records n as the length sent. It renames a new file over
// the old one, so a crash leaves one or the other.
func (g *Gateway) writePushed(n int64) error {
	path := filepath.Join(g.cfg.Dir, PushedFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(n, 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("record sent groups: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record sent groups: %w", err)
	}
	return nil
}

// kickPusher tells the pusher a record was committed.
func (g *Gateway) kickPusher() {
	if g.pushKick == nil {
		return
	}
	select {
	case g.pushKick <- struct{}{}:
	default: // a kick is already pending
	}
}
