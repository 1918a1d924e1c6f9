package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/trajectory/gateway"
)

// failingBackend fails as the user's last message asks: "fail" with a
// 502 whose text holds credentials, "slow" past the server's request
// timeout, "conn" with a lost connection. Any other message gets
// fakeBackend's answer. It counts the calls it sees.
type failingBackend struct{ calls atomic.Int64 }

func (*failingBackend) Name() string { return "remote" }

func (b *failingBackend) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	b.calls.Add(1)
	switch req.Messages[len(req.Messages)-1].Content {
	case "fail":
		return nil, &delegate.APIError{Status: http.StatusBadGateway, Type: "server_error",
			Message: "upstream down: key sk-abcdefghijkl, Authorization: Bearer s3cr3t at http://user:pw@10.0.0.1/v1"}
	case "slow":
		<-ctx.Done()
		return nil, ctx.Err()
	case "conn":
		return nil, errors.New(`Post "http://user:pw@10.0.0.1/v1/chat/completions": connection reset by peer`)
	}
	return fakeBackend{}.Chat(ctx, req)
}

// ended keeps the sessions a gateway ends, by group.
type ended struct {
	mu   sync.Mutex
	fins map[string][]*gateway.Finished
}

func (e *ended) see(fin *gateway.Finished, _ bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fins == nil {
		e.fins = map[string][]*gateway.Finished{}
	}
	e.fins[fin.Group] = append(e.fins[fin.Group], fin)
}

func (e *ended) of(group string) []*gateway.Finished {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fins[group]
}

// openFake opens a gateway over a failing backend on loopback with cfg
// on top of the defaults.
func openFake(t *testing.T, set func(*gateway.Config)) (*harness, *failingBackend, *ended) {
	t.Helper()
	b, e := &failingBackend{}, &ended{}
	cfg := gateway.DefaultConfig()
	cfg.Dir, cfg.Token, cfg.GroupSize, cfg.Ended = t.TempDir(), "admin-token", 2, e.see
	set(&cfg)
	gw, err := gateway.Open(context.Background(), cfg, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: httptest.NewServer(gw), gw: gw, cfg: cfg}
	t.Cleanup(func() {
		h.srv.Close()
		if err := gw.Close(); err != nil {
			t.Error(err)
		}
	})
	return h, b, e
}

// apiError returns the API error of a failed call.
func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an API error, got %v", err)
	}
	return e
}

// TestGatewayRecordsFailedCalls makes calls the backend fails: an error
// status, a timeout, a lost connection, streamed or not. Each is
// recorded, failed, with its status and its error's text without
// credentials, and makes no sample.
func TestGatewayRecordsFailedCalls(t *testing.T) {
	ctx := context.Background()
	h, _, ends := openFake(t, func(c *gateway.Config) {
		c.Server.RequestTimeout = 200 * time.Millisecond
		c.Tokenizers = map[string]gateway.Tokenizer{"remote": byteTemplate{}}
	})
	id, c := h.session(`{"group":"g"}`)
	tests := []struct {
		name, text string
		stream     bool
		status     int
		says       string
	}{
		{"backend error", "fail", false, 502, "upstream down"},
		{"backend error streamed", "fail", true, 502, "upstream down"},
		{"timeout", "slow", false, 504, "timeout: the generation did not finish"},
		{"lost connection", "conn", false, 500, "connection reset by peer"},
	}
	params := func(text string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "remote", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
	}
	for _, tc := range tests {
		var err error
		if tc.stream {
			s := c.Chat.Completions.NewStreaming(ctx, params(tc.text))
			for s.Next() {
			}
			err = s.Err()
		} else {
			_, err = c.Chat.Completions.New(ctx, params(tc.text))
		}
		if e := apiError(t, err); e.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, e.StatusCode, tc.status)
		}
	}
	if _, err := c.Chat.Completions.New(ctx, params("ids")); err != nil {
		t.Fatal(err)
	}
	if rr := h.reward(id, `{"reward":1}`); rr.Calls != len(tests)+1 || rr.Samples["remote"] != 1 {
		t.Errorf("reward: %+v, want %d calls and one sample, of the answered call", rr, len(tests)+1)
	}
	f := ends.of("g")[0]
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := f.Calls[i]
			if !k.Failed || k.Status != tc.status || !strings.Contains(k.Error, tc.says) || k.Role != "remote" || k.Request.Messages[0].Content != tc.text {
				t.Errorf("call %+v, want failed with %d saying %q, its request kept", k, tc.status, tc.says)
			}
			for _, secret := range []string{"abcdefghijkl", "s3cr3t", "user:pw"} {
				if strings.Contains(k.Error, secret) {
					t.Errorf("the recorded error %q holds a credential", k.Error)
				}
			}
		})
	}
	if k := f.Calls[len(tests)]; k.Failed || len(f.Samples) != 1 || f.Samples[0].Calls[0] != k.Index {
		t.Errorf("the answered call %+v made samples %+v, want the one sample", k, f.Samples)
	}
	if m := h.metrics(); !strings.Contains(m, "delegate_gateway_failed_calls_total 4") {
		t.Errorf("/metrics does not count 4 failed calls")
	}
}
