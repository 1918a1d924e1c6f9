package atropos

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Held requests (delegate's extension; Atropos's clients poll). A trainer
// asking GET /batch?wait=S, or an environment asking GET
// /status-env?after_step=N&wait=S, is answered as soon as there is
// something new to tell it (a batch ready; the trainer past step N), or
// after S seconds with what it would have got at once. The hand-offs of a
// sequential loop then cost no poll interval. Without wait a request is
// answered at once, as Atropos's server answers it.

// notify wakes every held request to look again. The caller holds s.mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// waitParam is the request's wait query parameter (seconds, fractions
// allowed; absent: 0), refused past Config.MaxWait.
func (s *Server) waitParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
		return 0, &httpError{http.StatusBadRequest, fmt.Sprintf("wait %q: want seconds, at least 0", v)}
	}
	d := time.Duration(secs * float64(time.Second))
	if d > s.cfg.MaxWait {
		return 0, &httpError{http.StatusBadRequest, fmt.Sprintf("wait %q: at most %g seconds", v, s.cfg.MaxWait.Seconds())}
	}
	return d, nil
}

// holder holds one request across its waits. It counts against
// Config.MaxHeld from its first wait to done. It gives the request's
// concurrency slot back while it waits.
type holder struct {
	s        *Server
	r        *http.Request
	deadline *time.Timer // nil before the first wait
	counted  bool
}

// newHolder holds r for at most wait in all.
func (s *Server) newHolder(r *http.Request, wait time.Duration) *holder {
	h := &holder{s: s, r: r}
	if wait > 0 {
		h.deadline = time.NewTimer(wait)
	}
	return h
}

// may reports whether the request may wait, again or first. It must have
// asked to, its time must not be up, and fewer than MaxHeld others wait.
func (h *holder) may() bool {
	if h.deadline == nil {
		return false
	}
	select {
	case <-h.s.stopping:
		return false
	default:
	}
	if !h.counted {
		if h.s.held.Add(1) > int64(h.s.cfg.MaxHeld) {
			h.s.held.Add(-1)
			h.deadline.Stop()
			h.deadline = nil
			return false
		}
		h.counted = true
	}
	return true
}

// wait waits until ch closes, time is up, the server shuts down or the
// request ends. Its concurrency slot is given back meanwhile. It reports
// false when the request ended (nothing is to be written then); once its time
// is up or the server shuts down, may says it waits no more.
func (h *holder) wait(ch <-chan struct{}) bool {
	<-h.s.sem
	timedOut := false
	select {
	case <-ch:
	case <-h.deadline.C:
		timedOut = true
	case <-h.s.stopping:
	case <-h.r.Context().Done():
	}
	if timedOut {
		h.deadline = nil
	}
	// A slot again, which Handler gives back as the request returns (an
	// ended request too waits for one: requests hold slots only briefly).
	h.s.sem <- struct{}{}
	return h.r.Context().Err() == nil
}

// done ends the hold.
func (h *holder) done() {
	if h.deadline != nil {
		h.deadline.Stop()
	}
	if h.counted {
		h.s.held.Add(-1)
	}
}
