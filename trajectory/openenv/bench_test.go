package openenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/delegatelab/delegate/internal/edge"
)

// BenchmarkEpisode runs one episode an op in process, over the WebSocket and over HTTP MCP.
// The sub-agent is the fake solver, in process, so the protocol's cost stands out.
// An episode delegates every step of its problem, then answers.
// cpu-ns/op is the process's CPU time an episode, both ends included; the wall time moves with the machine's load.
//
//	go test -run '^$' -bench Episode -benchmem ./trajectory/openenv
func BenchmarkEpisode(b *testing.B) {
	srv, d := newDelegationServer(b, DelegationConfig{MaxSteps: 64}, func(c *Config) { c.MaxMCPEpisodes = 1 << 30 })
	c := serveWith(b, srv, "", edge.DefaultTimeouts()) // serve's short timeouts fail requests on a loaded machine
	const problems = 64
	questions := make([][]string, problems)
	answers := make([]string, problems)
	for i := range problems {
		p, err := d.Problem(int64(i))
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range p.Steps {
			questions[i] = append(questions[i], s.Expr())
		}
		answers[i] = fmt.Sprint(p.Answer)
	}
	arms := []struct {
		name string
		open func(ctx context.Context) (Stepper, error)
	}{
		{"in-process", func(context.Context) (Stepper, error) {
			env, err := d.New()
			return localStepper{env}, err
		}},
		{"websocket", func(ctx context.Context) (Stepper, error) { return c.Dial(ctx) }},
		{"http-mcp", func(context.Context) (Stepper, error) { return c.OpenMCP(), nil }},
	}
	for _, a := range arms {
		b.Run(a.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := a.open(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			steps := 0
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				n, err := benchEpisode(ctx, s, int64(i%problems), questions[i%problems], answers[i%problems])
				if err != nil {
					b.Fatalf("episode %d: %v", i, err)
				}
				steps += n
			}
			b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
			if cpu := cpuTime() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// benchEpisode resets seed, delegates each question and answers. It
// returns the steps it ran.
func benchEpisode(ctx context.Context, s Stepper, seed int64, questions []string, answer string) (int, error) {
	if _, err := s.Reset(ctx, ResetRequest{Seed: &seed}); err != nil {
		return 0, err
	}
	for i, q := range questions {
		res, err := s.Step(ctx, call(ToolDelegate, map[string]string{"question": q}))
		if err != nil {
			return i, err
		}
		if res.Done {
			return i + 1, errors.New("done before the answer")
		}
	}
	res, err := s.Step(ctx, call(ToolAnswer, map[string]string{"answer": answer}))
	if err != nil {
		return len(questions), err
	}
	if !res.Done {
		return len(questions) + 1, errors.New("not done after the answer")
	}
	return len(questions) + 1, nil
}

// localStepper runs an environment in process as a Stepper. It encodes
// the action, as Environment.Step takes it, and not the observation.
type localStepper struct{ env Environment }

func (l localStepper) Reset(ctx context.Context, req ResetRequest) (Result, error) {
	obs, err := l.env.Reset(ctx, req.Seed, "")
	return Result{Reward: obs.Reward, Done: obs.Done}, err
}

func (l localStepper) Step(ctx context.Context, action any) (Result, error) {
	b, err := json.Marshal(action)
	if err != nil {
		return Result{}, err
	}
	obs, err := l.env.Step(ctx, b)
	return Result{Reward: obs.Reward, Done: obs.Done}, err
}

func (l localStepper) State(context.Context) (json.RawMessage, error) {
	return json.Marshal(l.env.State())
}

func (l localStepper) Close() error { return l.env.Close() }
