package view

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// heartbeat is how often a quiet stream sends a comment, so that proxies
// and the browser keep it open.
const heartbeat = 15 * time.Second

// resumePoint reads where a stream starts: after the Last-Event-ID a
// reconnecting browser sends, else after ?after=N, else at 0.
func resumePoint(r *http.Request) (int, error) {
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, badRequest("resume point %q: want a whole number ≥ 0", v)
		}
		return n, nil
	}
	return 0, nil
}

// eventStream is a response of server-sent events.
type eventStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	log *slog.Logger
}

// startStream answers 200 with the headers of an event stream, sent at
// once.
func startStream(w http.ResponseWriter, log *slog.Logger) *eventStream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	es := &eventStream{w: w, rc: http.NewResponseController(w), log: log}
	// The headers go at once, so that a client sees the stream open
	// before its first event. A failed flush shows at the first write.
	_ = es.rc.Flush()
	return es
}

// extend pushes the write deadline past the next heartbeat. The edge's
// write timeout bounds one response; a stream moves it before each write.
func (e *eventStream) extend() {
	if err := e.rc.SetWriteDeadline(time.Now().Add(heartbeat + 10*time.Second)); err != nil {
		e.log.Debug("view: stream without write deadlines", "err", err)
	}
}

// send writes v as the data of the event id and flushes it. It reports
// false when v does not encode or the client went away.
func (e *eventStream) send(id int, v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		return false
	}
	if _, err := fmt.Fprintf(e.w, "id: %d\ndata: %s\n\n", id, data); err != nil {
		return false
	}
	return e.rc.Flush() == nil
}

// beat writes a comment, so that a quiet stream stays open. It reports
// false when the client went away.
func (e *eventStream) beat() bool {
	if _, err := fmt.Fprint(e.w, ": still here\n\n"); err != nil {
		return false
	}
	return e.rc.Flush() == nil
}

// fail writes a failure event; the browser tries again after the retry
// interval.
func (e *eventStream) fail(err error) {
	msg, _ := json.Marshal(err.Error()) // a string always encodes
	fmt.Fprintf(e.w, "retry: 10000\nevent: failure\ndata: %s\n\n", msg)
	// A failed flush means the client went away; nothing to do.
	_ = e.rc.Flush()
}
