package transcript

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/strategy"
)

// Prompts are this world's compact overrides of the strategy package's
// prompt templates, by template name. Every template is overridden, so a
// strategy built with StrategyConfig sends exactly the prompts the local
// models were trained on. The solver sees the same prompt whether route
// calls it, with the weak_* templates, or decompose, with subagent_*: a
// system line and the bare question, "347*28".
var Prompts = map[string]string{
	"single_system": `Solve.`,
	"single_user":   `{{.Request}}`,

	"route_system": `Solve or delegate.`,
	"route_user":   `{{.Request}}`,

	"weak_system": `Compute.`,
	"weak_user":   `{{.Question}}`,

	"subagent_system": `Compute.`,
	"subagent_user":   `{{.Subtask}}`,

	"plan_system": `Plan in <|reasoning|></|reasoning|>, then {{.Min}}-{{.Max}} steps for the solver, each in <|subtask|><|end_subtask|>.`,
	"plan_user":   `{{.Request}}`,

	"aggregate_system": `Finish with the results. Answer after Final Output:`,
	"aggregate_user":   `{{.Request}}` + "\n" + `{{.Reasoning}}{{range .Results}}` + "\n" + `{{.Subtask}} gave {{.Result}}{{end}}`,

	"peer_system": `Solve. End with <answer>N</answer>.`,
	"peer_user":   `{{.Request}}`,
	"peer_refine": `Leader: {{.Leader}}` + "\n" + `Solve again. End with <answer>N</answer>.`,

	"leader_system": `{{.K}} agents answered. Check where they differ. End with <answer>N</answer>.`,
	"leader_user": `{{.Request}}{{range .Peers}}` + "\n" + `Agent {{.Index}}:` + "\n" +
		`{{.Answer}}{{end}}{{if .Previous}}` + "\n" + `Your last answer:` + "\n" + `{{.Previous}}{{end}}`,
}

// Tool is this world's compact declaration of route's delegate tool. It is
// the name only: 19 tokens under the chat template, against 372 for
// strategy.DelegateTool's description and JSON schema. Every route request
// carries it and every later turn reads it again. The local delegator was
// trained on it; StrategyConfig has route declare it through
// strategy.Config.Tool.
var Tool = delegate.Tool{Name: strategy.DelegateToolName}

// CompactTools wraps m so that requests offering strategy's delegate tool
// offer Tool instead. Other tools and the rest of the request pass on
// unchanged, and the caller's request is not modified. It is for a server of
// the local models, as delegate serve and run use under the world preset,
// whose clients declare the tool their own way; strategies built from
// StrategyConfig declare Tool themselves. The wrapper is safe for concurrent
// use when m is.
func CompactTools(m delegate.Model) delegate.Model { return compactTools{m} }

type compactTools struct{ delegate.Model }

func (c compactTools) Chat(ctx context.Context, req *delegate.Request) (*delegate.Response, error) {
	if !slices.ContainsFunc(req.Tools, func(t delegate.Tool) bool { return t.Name == strategy.DelegateToolName }) {
		return c.Model.Chat(ctx, req)
	}
	r := *req
	r.Tools = make([]delegate.Tool, len(req.Tools))
	for i, t := range req.Tools {
		if t.Name == strategy.DelegateToolName {
			t = Tool
		}
		r.Tools[i] = t
	}
	return c.Model.Chat(ctx, &r)
}

// Subtask bounds of decompose in this world: a plan hands the solver one
// to four independent steps.
const (
	MinSubtasks = 1
	MaxSubtasks = 4
)

// StrategyConfig returns the strategy configuration for this world. It is
// the strategy defaults with Prompts and one to four subtasks. Sub-agents
// see only their subtask. Lead has no refinement rounds, since the leader
// transcripts are of round 0. Route hands back the solver's answer without
// its working, strategy.ToolResultAnswer. Generation budgets fit every
// transcript of the default world; the longest are a few hundred tokens.
func StrategyConfig() strategy.Config {
	c := strategy.DefaultConfig()
	c.Prompts = make(map[string]string, len(Prompts))
	for k, v := range Prompts {
		c.Prompts[k] = v
	}
	c.MinSubtasks, c.MaxSubtasks = MinSubtasks, MaxSubtasks
	c.SubagentContext = false
	c.SubagentRetries = 0
	c.Rounds = 0
	c.Weak.MaxTokens, c.Subagent.MaxTokens = 64, 64
	c.Strong.MaxTokens, c.Single.MaxTokens = 768, 1024
	c.Plan.MaxTokens, c.Aggregate.MaxTokens = 192, 768
	c.Peer.MaxTokens, c.Leader.MaxTokens = 256, 1024
	c.ToolResult = strategy.ToolResultAnswer
	t := Tool
	c.Tool = &t
	return c
}

// prompter renders this world's templates the way the strategy package
// does: text/template with missingkey=error, output trimmed.
type prompter map[string]*template.Template

var worldPrompts = func() prompter {
	p := prompter{}
	for name, text := range Prompts {
		if _, ok := strategy.DefaultPrompt(name); !ok {
			panic(fmt.Sprintf("transcript: prompt %s overrides no strategy template", name)) // a constant table; tested
		}
		p[name] = template.Must(template.New(name).Option("missingkey=error").Parse(text))
	}
	return p
}()

func (p prompter) render(name string, d strategy.PromptData) string {
	var b strings.Builder
	if err := p[name].Execute(&b, d); err != nil {
		panic(fmt.Sprintf("transcript: render prompt %s: %v", name, err)) // constant templates over typed data; tested
	}
	return strings.TrimSpace(b.String())
}

// messages is a system and a user message from two templates.
func (p prompter) messages(system, user string, d strategy.PromptData) []delegate.Message {
	return []delegate.Message{delegate.System(p.render(system, d)), delegate.User(p.render(user, d))}
}
