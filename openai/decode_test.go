package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai/wire"
)

// recordingReader remembers the first error other than io.EOF that its
// reader returned, and stops with errTooLarge after left bytes. It is
// part of streamingDecode.
type recordingReader struct {
	r    io.Reader
	left int64
	err  error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// streamingDecode is the reference for decodeResponseLimit: a
// json.Decoder reading the body as it comes, as the client decoded
// before it read bodies whole.
func streamingDecode(r io.Reader, limit int64, fallbackModel string, tokenIDs bool) (*delegate.Response, error) {
	rr := &recordingReader{r: r, left: limit}
	var w wire.ChatResponse
	if err := json.NewDecoder(rr).Decode(&w); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, &decodeError{err: fmt.Errorf("decode body: more than %d bytes: %w", limit, err)}
		}
		if rr.err != nil {
			return nil, &decodeError{err: fmt.Errorf("read body: %w", rr.err), readErr: true}
		}
		return nil, &decodeError{err: fmt.Errorf("decode body: %w", err)}
	}
	if w.Error != nil && len(w.Choices) == 0 {
		return nil, &serverError{detail: *w.Error}
	}
	return convertResponse(&w, fallbackModel, tokenIDs)
}

// brokenBody hands out its bytes a few at a time, then fails with err
// (io.EOF: ends).
type brokenBody struct {
	data  string
	chunk int
	err   error
}

func (b *brokenBody) Read(p []byte) (int, error) {
	if b.data == "" {
		return 0, b.err
	}
	n := copy(p[:min(len(p), b.chunk)], b.data)
	b.data = b.data[n:]
	return n, nil
}

var errBroken = errors.New("connection reset")

// checkDecodeMatches decodes body through decodeResponseLimit and the
// streaming reference, from a reader that gives chunk bytes at a time
// and then fails with end; both must agree.
func checkDecodeMatches(t *testing.T, body string, chunk int, end error, size, limit int64, tokenIDs bool) {
	t.Helper()
	got, err := decodeResponseLimit(&brokenBody{body, chunk, end}, size, limit, "m", tokenIDs)
	want, werr := streamingDecode(&brokenBody{body, chunk, end}, limit, "m", tokenIDs)
	if (err == nil) != (werr == nil) {
		t.Fatalf("error %v, the streaming decoder's %v", err, werr)
	}
	if err != nil {
		var de, wde *decodeError
		if errors.As(err, &de) != errors.As(werr, &wde) || de != nil && de.readErr != wde.readErr ||
			errors.Is(err, errTooLarge) != errors.Is(werr, errTooLarge) {
			t.Fatalf("error %#v, the streaming decoder's %#v", err, werr)
		}
		var se, wse *serverError
		if errors.As(err, &se) && (!errors.As(werr, &wse) || se.detail != wse.detail) {
			t.Fatalf("error %#v, the streaming decoder's %#v", err, werr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, the streaming decoder's %+v", got, want)
	}
}

func TestDecodeResponseMatchesStreaming(t *testing.T) {
	big := `{"choices":[{"message":{"content":"` + strings.Repeat("é", 700) + `"}}]}`
	tests := []struct {
		name  string
		body  string
		end   error
		size  int64
		limit int64
	}{
		{"tool calls", toolCallResponse, io.EOF, int64(len(toolCallResponse)), maxResponseBytes},
		{"size unknown", toolCallResponse, io.EOF, -1, maxResponseBytes},
		{"size too small", big, io.EOF, 10, maxResponseBytes},
		{"size too large", big, io.EOF, 100000, maxResponseBytes},
		{"trailing newline", big + "\n", io.EOF, -1, maxResponseBytes},
		{"trailing value", big + `{"x":1}`, io.EOF, -1, maxResponseBytes},
		{"trailing junk", big + `junk`, io.EOF, -1, maxResponseBytes},
		{"broken after the value", big, errBroken, -1, maxResponseBytes},
		{"broken inside the value", big[:300], errBroken, -1, maxResponseBytes},
		{"invalid, then broken", `{"choices":x` + big, errBroken, -1, maxResponseBytes},
		{"cut short", big[:300], io.EOF, -1, maxResponseBytes},
		{"empty", "", io.EOF, 0, maxResponseBytes},
		{"blank", "  \n", io.EOF, -1, maxResponseBytes},
		{"over the limit", big, io.EOF, -1, 500},
		{"the limit exactly", big, io.EOF, -1, int64(len(big))},
		{"value within the limit, more after", big + strings.Repeat(" ", 100) + "x", io.EOF, -1, int64(len(big)) + 10},
		{"error object", `{"error":{"message":"upstream overloaded","type":"server_error","code":502}}`, io.EOF, -1, maxResponseBytes},
		{"wrong type", `{"choices":[{"index":"0","message":{"content":"a"}}]}`, io.EOF, -1, maxResponseBytes},
		{"no choices", `{"choices":[]}`, io.EOF, -1, maxResponseBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 512, 1 << 20} {
				checkDecodeMatches(t, tt.body, chunk, tt.end, tt.size, tt.limit, false)
			}
		})
	}
}

// FuzzDecodeResponseMatchesStreaming compares decodeResponseLimit with the
// streaming decoder on any body, cut into any chunks, ended by EOF or a
// broken connection, under any limit.
func FuzzDecodeResponseMatchesStreaming(f *testing.F) {
	f.Add([]byte(toolCallResponse), 7, false, int64(-1), int64(1<<20), true)
	f.Add([]byte(`{"choices":[{"message":{"content":"a"}}]} {"x"`), 3, true, int64(5), int64(40), false)
	f.Add([]byte(`{"error":{"message":"x","code":500}}`), 1, false, int64(0), int64(10), false)
	f.Fuzz(func(t *testing.T, body []byte, chunk int, broken bool, size, limit int64, tokenIDs bool) {
		chunk = 1 + abs(chunk)%4096
		limit = 1 + abs64(limit)%(2*int64(len(body))+2)
		end := io.EOF
		if broken {
			end = errBroken
		}
		checkDecodeMatches(t, string(body), chunk, end, size, limit, tokenIDs)
	})
}

func abs(v int) int {
	if v < 0 {
		return -(v + 1)
	}
	return v
}

func abs64(v int64) int64 {
	if v < 0 {
		return -(v + 1)
	}
	return v
}
