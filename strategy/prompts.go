package strategy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"text/template"
)

//go:embed prompts/*.tmpl
var promptFiles embed.FS

// defaultPrompts maps each template name (the file name without .tmpl) to
// its embedded text.
var defaultPrompts = func() map[string]string {
	m := map[string]string{}
	entries, err := fs.Glob(promptFiles, "prompts/*.tmpl")
	if err != nil {
		panic(fmt.Sprintf("strategy: embedded prompts: %v", err)) // the pattern is a constant
	}
	for _, e := range entries {
		b, err := promptFiles.ReadFile(e)
		if err != nil {
			panic(fmt.Sprintf("strategy: embedded prompt %s: %v", e, err)) // embedded files always read
		}
		m[strings.TrimSuffix(path.Base(e), ".tmpl")] = string(b)
	}
	return m
}()

// PromptNames returns the names of the prompt templates, sorted. Each is a
// text/template executed over PromptData; the rendered text is trimmed of
// surrounding white space. The templates and the fields they use:
//
//	single_system, single_user       single: Request
//	plan_system, plan_user           decompose stage 1: Request, Min, Max, SubagentContext
//	subagent_system, subagent_user   decompose stage 2: Request ("" when subagent_context is off), Subtask, Index, Budget
//	aggregate_system, aggregate_user decompose stage 3: Request, Reasoning, Results
//	route_system, route_user         route, strong model: Request
//	weak_system, weak_user           route, weak model: Question
//	peer_system, peer_user           lead, round 0: Request, Index
//	peer_refine                      lead, rounds 1..T, after the peer's own last answer: Request, Index, Leader, Round
//	leader_system, leader_user       lead, every round: Request, K, Peers, Previous, Round
func PromptNames() []string {
	names := make([]string, 0, len(defaultPrompts))
	for n := range defaultPrompts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultPrompt returns the embedded text of the named template.
func DefaultPrompt(name string) (string, bool) {
	s, ok := defaultPrompts[name]
	return s, ok
}

// PromptData is what every prompt template is executed over. Each template
// uses the fields listed in PromptNames; the others are zero.
type PromptData struct {
	Request         string // the user's request
	Min, Max        int    // decompose: bounds on the number of subtasks
	SubagentContext bool   // decompose: whether sub-agents see the request
	Subtask         string // decompose: the sub-agent's subtask
	Index           int    // decompose: the subtask's number; lead: the peer's number (both from 1)
	Budget          int    // decompose: the sub-agent's token budget
	Reasoning       string // decompose: the delegator's plan reasoning
	Results         []SubtaskResult
	Question        string // route: the delegated question
	K               int    // lead: the number of peers
	Round           int    // lead: the round, from 0
	Peers           []PeerAnswer
	Leader          string // lead: the leader's last output
	Previous        string // lead: the leader's previous output ("" in round 0)
}

// SubtaskResult is one subtask and what its sub-agent returned (or the
// stated failure), as the aggregator sees it.
type SubtaskResult struct {
	Index   int // from 1
	Subtask string
	Result  string
}

// PeerAnswer is one peer's latest response, as the leader sees it.
type PeerAnswer struct {
	Index  int // from 1
	Answer string
}

// sampleData fills every field, so that executing a template over it finds
// references to fields that do not exist.
var sampleData = PromptData{
	Request: "request", Min: 3, Max: 5, SubagentContext: true, Subtask: "subtask", Index: 1, Budget: 512,
	Reasoning: "reasoning", Results: []SubtaskResult{{1, "subtask", "result"}}, Question: "question",
	K: 3, Round: 1, Peers: []PeerAnswer{{1, "answer"}}, Leader: "leader", Previous: "previous",
}

func parsePrompt(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", name, err)
	}
	return t, nil
}

// checkPrompt parses text as the template name and executes it over sample
// data.
func checkPrompt(name, text string) error {
	t, err := parsePrompt(name, text)
	if err != nil {
		return err
	}
	if err := t.Execute(&strings.Builder{}, sampleData); err != nil {
		return fmt.Errorf("execute template %s: %w", name, err)
	}
	return nil
}

// prompts is the parsed set of templates a strategy renders, defaults with
// overrides applied. It is read-only after newPrompts, so safe to share.
type prompts map[string]*template.Template

func newPrompts(overrides map[string]string) (prompts, error) {
	p := prompts{}
	for name, text := range defaultPrompts {
		if o, ok := overrides[name]; ok {
			text = o
		}
		t, err := parsePrompt(name, text)
		if err != nil {
			return nil, err
		}
		p[name] = t
	}
	return p, nil
}

// render executes the named template over d and trims the result.
func (p prompts) render(name string, d PromptData) (string, error) {
	t, ok := p[name]
	if !ok {
		return "", fmt.Errorf("render prompt %s: no such template", name)
	}
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("render prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}
