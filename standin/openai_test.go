package standin

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/strategy"
)

// openaiModel returns the project's client for s, from openai's defaults changed by set.
// Its transport's idle connections are closed when the test ends.
func openaiModel(t *testing.T, s *Server, set func(*openai.Config)) delegate.Model {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := openai.DefaultConfig()
	set(&cfg)
	cfg.BaseURL, cfg.APIKey, cfg.Model = s.URL(), "sk-standin-test", DefaultConfig().Model
	c, err := openai.New(cfg, openai.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStrategiesOverOpenAI runs the four strategies over the project's
// openai client against the stand-in.
func TestStrategiesOverOpenAI(t *testing.T) {
	s := start(t, testConfig(func(c *Config) { c.Seed = 5 }))
	a := delegate.Agent{Model: openaiModel(t, s, func(c *openai.Config) { c.Timeout = 10 * time.Second })}
	roles := strategy.Roles{Single: a, Delegator: a, Subagent: a, Strong: a, Weak: a, Leader: a, Peers: []delegate.Agent{a}}
	cfg := strategy.DefaultConfig()
	tests := []struct {
		name  string
		calls int
	}{
		{strategy.NameSingle, 1},
		{strategy.NameDecompose, 1 + DefaultConfig().Subtasks + 1},
		{strategy.NameRoute, 1 + DefaultConfig().ToolCalls + 1},
		{strategy.NameLead, (cfg.Peers + 1) * (cfg.Rounds + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := strategy.New(tt.name, roles, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := st.Run(context.Background(), "What is 17 + 25?", nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tr.Failure != "" || tr.Answer == "" || len(tr.Calls()) != tt.calls {
				t.Errorf("failure %q, answer %q, %d calls; want a proper answer after %d calls", tr.Failure, tr.Answer, len(tr.Calls()), tt.calls)
			}
			if tr.Total.Usage.PromptTokens == 0 || tr.Total.Usage.CompletionTokens == 0 {
				t.Errorf("usage %+v: want both counts", tr.Total.Usage)
			}
		})
	}
}

// TestOpenAIRetriesEveryFault runs route rollouts over the openai client against a faulty stand-in.
// It injects every kind of fault but Slow, which TestOpenAISlowFault covers.
// Each faulted attempt is retried and every rollout still ends with an answer.
// The retries the traces record equal the faults the server injected.
func TestOpenAIRetriesEveryFault(t *testing.T) {
	faults := Uniform(0.03)
	faults.Slow = 0
	s := start(t, testConfig(func(c *Config) { c.Seed, c.Faults, c.RetryAfter = 9, faults, 2*time.Millisecond }))
	// The timeout is far above any answer's time, even under -race on a
	// loaded machine: a timed-out proper answer would be a retry too many.
	m := openaiModel(t, s, func(c *openai.Config) {
		c.Timeout, c.MaxRetries, c.MinBackoff, c.MaxBackoff = 30*time.Second, 8, time.Millisecond, 4*time.Millisecond
	})
	a := delegate.Agent{Model: m}
	st, err := strategy.New(strategy.NameRoute, strategy.Roles{Strong: a, Weak: a}, strategy.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	const rollouts = 24
	var mu sync.Mutex
	retries := 0
	var wg sync.WaitGroup
	for i := range rollouts {
		wg.Go(func() {
			tr, err := st.Run(context.Background(), "rollout "+string(rune('a'+i)), nil)
			if err != nil || tr.Failure != "" {
				t.Errorf("rollout %d: err %v, failure %q", i, err, tr.Failure)
				return
			}
			mu.Lock()
			retries += tr.Total.Retries
			mu.Unlock()
		})
	}
	wg.Wait()
	stats := s.Stats()
	if int64(retries) != stats.Faults.Total() {
		t.Errorf("traces record %d retries, the server injected %d faults (%+v)", retries, stats.Faults.Total(), stats.Faults)
	}
	if stats.Faults.Total() == 0 {
		t.Errorf("no fault injected in %d requests", stats.Requests)
	}
	if got, want := stats.AnswersTotal(), int64(rollouts*(2+DefaultConfig().ToolCalls)); got != want {
		t.Errorf("%d proper answers, want %d", got, want)
	}
}

// TestOpenAISlowFault checks that an answer slower than the client's timeout is seen as a timeout.
// The server gives up on it.
func TestOpenAISlowFault(t *testing.T) {
	s := start(t, testConfig(func(c *Config) { c.Faults, c.SlowDelay = FaultRates{Slow: 1}, time.Minute }))
	m := openaiModel(t, s, func(c *openai.Config) { c.Timeout, c.MaxRetries = 50*time.Millisecond, 0 })
	_, err := m.Chat(context.Background(), &delegate.Request{Messages: []delegate.Message{delegate.User("hi")}})
	var ae *delegate.APIError
	if !errors.As(err, &ae) || ae.Type != delegate.ErrKindTimeout {
		t.Fatalf("Chat: %v, want an APIError of type %s", err, delegate.ErrKindTimeout)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Canceled != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := s.Stats(); st.Faults.Slow != 1 || st.Canceled != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v: want 1 slow fault, given up on", st)
	}
}
