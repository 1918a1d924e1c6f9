package strategy

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/delegatelab/delegate"
)

// DelegateToolName is the name of the one tool route offers the strong model.
const DelegateToolName = "delegate"

// DelegateTool is the tool route offers: one required string, "question".
var DelegateTool = delegate.Tool{
	Name: DelegateToolName,
	Description: "Send one self-contained question to a cheaper assistant and get its answer back. " +
		"The assistant sees only the question.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string",` +
		`"description":"The complete question, with every number and fact needed to answer it."}},` +
		`"required":["question"],"additionalProperties":false}`),
}

// route lets the strong model delegate questions to the weak one through a
// tool, turn by turn.
type route struct {
	strong, weak delegate.Agent
	cfg          Config
	p            prompts
}

func (r *route) Name() string { return NameRoute }

// Run loops over the strong model's turns until one has no tool calls.
// That turn ends the run with its answer. Otherwise the turn's tool calls
// run concurrently, at most ToolConcurrency at once, and their results go
// back to the model. A strong model still calling tools in turn MaxTurns
// ends the run with Failure "max turns"; those last calls are not run.
// Events go to events, which may be nil, by non-blocking sends; the caller
// owns the channel.
func (r *route) Run(ctx context.Context, request string, events chan<- delegate.Event) (*delegate.Trace, error) {
	rec := delegate.NewRecorder(NameRoute, request, events)
	msgs, err := r.p.messages("route_system", "route_user", PromptData{Request: request})
	if err != nil {
		return finishRun(ctx, rec, NameRoute, "", delegate.Failed(delegate.FailurePrompt, "%v", err))
	}
	for turn := 1; turn <= r.cfg.MaxTurns; turn++ {
		g := rec.Group(nil, TurnNode(turn))
		req := r.cfg.Strong.request(0, append([]delegate.Message(nil), msgs...))
		req.Tools = []delegate.Tool{r.declared()}
		req.ToolChoice = "auto"
		req.StrictToolCalls = r.cfg.StrictToolCalls
		resp, err := chat(ctx, rec, g, NodeStrong, r.strong, req)
		if err != nil {
			rec.EndGroup(g)
			return finishRun(ctx, rec, NameRoute, "", delegate.Failed(delegate.FailureCall, "%s: %v", TurnNode(turn), err))
		}
		out := resp.Choices[0].Message
		if len(out.ToolCalls) == 0 {
			rec.EndGroup(g)
			answer, fail := finalAnswer(resp, NodeStrong)
			return finishRun(ctx, rec, NameRoute, answer, fail)
		}
		if turn == r.cfg.MaxTurns {
			rec.EndGroup(g)
			break
		}
		results, err := r.tools(ctx, rec, g, turn, out.ToolCalls)
		rec.EndGroup(g)
		if err != nil {
			return panicked(rec, NameRoute, "", err)
		}
		if ctx.Err() != nil {
			return finishRun(ctx, rec, NameRoute, "", delegate.Failure{})
		}
		out.Role = delegate.RoleAssistant
		msgs = append(msgs, out)
		for i, tc := range out.ToolCalls {
			msgs = append(msgs, delegate.ToolResult(tc.ID, results[i]))
		}
	}
	return finishRun(ctx, rec, NameRoute, "", delegate.Failed(delegate.FailureMaxTurns, "the strong model still called tools in turn %d of %d", r.cfg.MaxTurns, r.cfg.MaxTurns))
}

// tools runs one turn's tool calls concurrently and returns the tool result
// text of each, in call order. A call's failure is its result, told to the
// model; only a panic is returned. It cancels the calls running and starts
// no more.
//
// This goroutine is one of the ToolConcurrency: it runs the last call, and
// any for which no other may start. Its stack has grown already; a new
// goroutine's grows again in the client's encoding and decoding, copied
// at each step.
func (r *route) tools(ctx context.Context, rec *delegate.Recorder, g *delegate.Node, turn int, calls []delegate.ToolCall) ([]string, error) {
	results := make([]string, len(calls))
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	run := func(i int) error {
		err := protect(func() error {
			results[i] = r.tool(gctx, rec, g, turn, i, calls[i])
			return nil
		})
		if err != nil {
			cancel(err)
		}
		return err
	}
	var eg errgroup.Group
	eg.SetLimit(r.cfg.ToolConcurrency - 1)
	var err error
	for i := range calls {
		if gctx.Err() != nil {
			break
		}
		if i < len(calls)-1 && eg.TryGo(func() error { return run(i) }) {
			continue
		}
		if err = run(i); err != nil {
			break
		}
	}
	if werr := eg.Wait(); werr != nil {
		err = werr
	}
	if err != nil {
		return nil, fmt.Errorf("%s tools: %w", TurnNode(turn), err)
	}
	return results, nil
}

// tool runs call i of a turn and returns its result text.
func (r *route) tool(ctx context.Context, rec *delegate.Recorder, g *delegate.Node, turn, i int, tc delegate.ToolCall) string {
	id := tc.ID
	if id == "" {
		id = "turn" + strconv.Itoa(turn) + "_" + strconv.Itoa(i+1) // the model gave none; name the node anyway
	}
	if tc.Name != DelegateToolName {
		msg := fmt.Sprintf("unknown tool %q: the only tool is %q", tc.Name, DelegateToolName)
		recordToolError(rec, g, ToolNode(id), msg)
		return "error: " + msg
	}
	q, err := ParseDelegateArgs(tc.Arguments)
	if err != nil {
		recordToolError(rec, g, DelegateNode(id), err.Error())
		return "error: " + err.Error() + `; call delegate with {"question": "..."}`
	}
	msgs, err := r.p.messages("weak_system", "weak_user", PromptData{Question: q})
	if err != nil {
		recordToolError(rec, g, DelegateNode(id), err.Error())
		return "error: the delegate tool could not build its prompt"
	}
	resp, err := chat(ctx, rec, g, DelegateNode(id), r.weak, r.cfg.Weak.request(0, msgs))
	if err != nil {
		return fmt.Sprintf("error: the delegate call failed: %v", err)
	}
	text := strings.TrimSpace(resp.Text())
	switch {
	case text == "":
		return "error: the assistant returned an empty answer"
	case resp.Choices[0].FinishReason == delegate.FinishLength:
		text += "\n[the answer was cut at max_tokens]"
	case r.cfg.ToolResult == ToolResultAnswer:
		if a, ok := FinalAnswer(text); ok {
			text = a
		}
	}
	return text
}

// recordToolError records a tool call refused without a model call.
// It is a group node with its error and no children.
func recordToolError(rec *delegate.Recorder, parent *delegate.Node, name, msg string) {
	n := rec.Group(parent, name)
	n.Error = msg // n is this goroutine's until EndGroup; nothing else reads it before
	rec.EndGroup(n)
}

// declared is the delegate tool as route declares it.
func (r *route) declared() delegate.Tool {
	if r.cfg.Tool != nil {
		return *r.cfg.Tool
	}
	return DelegateTool
}
