package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/openai"
	"github.com/delegatelab/delegate/strategy"
)

// An arm runs one rollout of the route shape.
// That is the strong model's first turn, its tool calls at once, then the final turn.
// It is safe for concurrent use.
type arm interface {
	name() string
	rollout(ctx context.Context, request string) error
}

// newTransport is the one transport configuration both arms use, so that
// the comparison is of what runs above it. dials counts the connections it
// opens.
func newTransport(idlePerHost int, dials *atomic.Int64) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        idlePerHost,
		MaxIdleConnsPerHost: idlePerHost,
		IdleConnTimeout:     90 * time.Second,
	}
}

// requestText is rollout i's user request, the same in both arms.
func requestText(i int) string {
	return fmt.Sprintf("Task %d: a shop sells %d pencils a day for %d days, then %d a day for %d days. How many pencils does it sell in all?",
		i, 20+i%37, 3+i%5, 11+i%13, 2+i%7)
}

// strategyArm runs the route strategy over the project's openai client.
type strategyArm struct {
	s delegate.Strategy
}

// newStrategyArm builds the route strategy over an openai client sending through hc.
// A nil hc sends through the openai package's shared default transport.
func newStrategyArm(baseURL string, hc *http.Client) (*strategyArm, error) {
	var opts []openai.Option
	if hc != nil {
		opts = append(opts, openai.WithHTTPClient(hc))
	}
	oc := openai.DefaultConfig()
	oc.BaseURL, oc.APIKey, oc.Model, oc.Timeout = baseURL, "standin", "standin", 60*time.Second
	c, err := openai.New(oc, opts...)
	if err != nil {
		return nil, fmt.Errorf("strategy arm: %w", err)
	}
	a := delegate.Agent{Model: c}
	s, err := strategy.New(strategy.NameRoute, strategy.Roles{Strong: a, Weak: a}, strategy.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("strategy arm: %w", err)
	}
	return &strategyArm{s: s}, nil
}

func (a *strategyArm) name() string { return "route" }

func (a *strategyArm) rollout(ctx context.Context, request string) error {
	tr, err := a.s.Run(ctx, request, nil)
	if err != nil {
		return err
	}
	if tr.Failure != "" {
		return errors.New(tr.Failure)
	}
	if n := len(tr.Calls()); n != callsPerRollout {
		return fmt.Errorf("%d calls, want %d", n, callsPerRollout)
	}
	return nil
}

// callsPerRollout is the route shape against the stand-in: 1 + 4 + 1.
const callsPerRollout = 6

// bareArm is the floor: a hand-written client on net/http and encoding/json.
// It makes the same requests with the same bodies and the same concurrency shape:
// 1, then the tool calls in parallel, then 1.
type bareArm struct {
	hc                 *http.Client
	url                string
	routeSys, weakSys  string
	tools              json.RawMessage
	strongGen, weakGen strategy.Generation
}

func newBareArm(baseURL string, hc *http.Client) (*bareArm, error) {
	routeSys, ok1 := strategy.DefaultPrompt("route_system")
	weakSys, ok2 := strategy.DefaultPrompt("weak_system")
	if !ok1 || !ok2 {
		return nil, errors.New("bare arm: the strategy package has no route_system or weak_system prompt")
	}
	t := strategy.DelegateTool
	tools, err := json.Marshal([]map[string]any{{"type": "function", "function": map[string]any{
		"name": t.Name, "description": t.Description, "parameters": t.Parameters}}})
	if err != nil {
		return nil, fmt.Errorf("bare arm: %w", err)
	}
	cfg := strategy.DefaultConfig()
	return &bareArm{hc: hc, url: strings.TrimRight(baseURL, "/") + "/chat/completions",
		routeSys: strings.TrimSpace(routeSys), weakSys: strings.TrimSpace(weakSys), tools: tools,
		strongGen: cfg.Strong, weakGen: cfg.Weak}, nil
}

func (b *bareArm) name() string { return "bare" }

type bareMsg struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []bareCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type bareCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type bareReq struct {
	Model       string          `json:"model"`
	Messages    []bareMsg       `json:"messages"`
	Tools       json.RawMessage `json:"tools,omitempty"`
	ToolChoice  string          `json:"tool_choice,omitempty"`
	Temperature float64         `json:"temperature"`
	MaxTokens   int             `json:"max_tokens,omitempty"`
}

func (b *bareArm) post(ctx context.Context, r *bareReq) (*bareMsg, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer standin")
	resp, err := b.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse; the status is the error
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var out struct {
		Choices []struct {
			Message bareMsg `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if len(out.Choices) == 0 {
		return nil, errors.New("no choices")
	}
	return &out.Choices[0].Message, nil
}

func (b *bareArm) rollout(ctx context.Context, request string) error {
	msgs := []bareMsg{{Role: "system", Content: &b.routeSys}, {Role: "user", Content: &request}}
	strong := func() (*bareMsg, error) {
		return b.post(ctx, &bareReq{Model: "standin", Messages: msgs, Tools: b.tools, ToolChoice: "auto",
			Temperature: b.strongGen.Temperature, MaxTokens: b.strongGen.MaxTokens})
	}
	first, err := strong()
	if err != nil {
		return fmt.Errorf("first turn: %w", err)
	}
	results := make([]string, len(first.ToolCalls))
	errs := make([]error, len(first.ToolCalls))
	var wg sync.WaitGroup
	for i, tc := range first.ToolCalls {
		wg.Go(func() {
			var args struct {
				Question string `json:"question"`
			}
			if errs[i] = json.Unmarshal([]byte(tc.Function.Arguments), &args); errs[i] != nil {
				return
			}
			m, err := b.post(ctx, &bareReq{Model: "standin", Messages: []bareMsg{{Role: "system", Content: &b.weakSys},
				{Role: "user", Content: &args.Question}}, Temperature: b.weakGen.Temperature, MaxTokens: b.weakGen.MaxTokens})
			if errs[i] = err; err == nil && m.Content != nil {
				results[i] = *m.Content
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delegate calls: %w", err)
	}
	first.Role = "assistant"
	msgs = append(msgs, *first)
	for i, tc := range first.ToolCalls {
		msgs = append(msgs, bareMsg{Role: "tool", Content: &results[i], ToolCallID: tc.ID})
	}
	final, err := strong()
	if err != nil {
		return fmt.Errorf("final turn: %w", err)
	}
	if final.Content == nil || len(final.ToolCalls) > 0 {
		return errors.New("final turn: no answer")
	}
	if n := 2 + len(first.ToolCalls); n != callsPerRollout {
		return fmt.Errorf("%d calls, want %d", n, callsPerRollout)
	}
	return nil
}
