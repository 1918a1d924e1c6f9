package strategy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
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
type prompts map[string]*prompt

// prompt is one parsed template. parts, when not nil, is the template as
// plain text and fields, which render renders without text/template: route
// renders ten prompts a rollout, and executing a template reflects over a
// copy of PromptData each time.
type prompt struct {
	t     *template.Template
	parts []promptPart
}

// promptPart is literal text, or a field of PromptData when field is set.
type promptPart struct {
	text, field string
}

// fieldText is d's field name printed as text/template prints it. ok is
// false for a field it does not know; a test checks that it knows every
// string and int field.
func (d *PromptData) fieldText(name string) (s string, ok bool) {
	switch name {
	case "Request":
		return d.Request, true
	case "Subtask":
		return d.Subtask, true
	case "Reasoning":
		return d.Reasoning, true
	case "Question":
		return d.Question, true
	case "Leader":
		return d.Leader, true
	case "Previous":
		return d.Previous, true
	case "Min":
		return strconv.Itoa(d.Min), true
	case "Max":
		return strconv.Itoa(d.Max), true
	case "Index":
		return strconv.Itoa(d.Index), true
	case "Budget":
		return strconv.Itoa(d.Budget), true
	case "K":
		return strconv.Itoa(d.K), true
	case "Round":
		return strconv.Itoa(d.Round), true
	}
	return "", false
}

// plainParts returns t as text and fields, or nil when t uses anything
// else: a pipeline, a function, a condition, a range.
func plainParts(t *template.Template) []promptPart {
	if t.Tree == nil || t.Tree.Root == nil {
		return nil
	}
	parts := []promptPart{}
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, promptPart{text: string(n.Text)})
		case *parse.ActionNode:
			p := n.Pipe
			if len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 {
				return nil
			}
			if _, ok := (&PromptData{}).fieldText(f.Ident[0]); !ok {
				return nil
			}
			parts = append(parts, promptPart{field: f.Ident[0]})
		default:
			return nil
		}
	}
	return parts
}

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
		p[name] = &prompt{t: t, parts: plainParts(t)}
	}
	return p, nil
}

// render executes the named template over d and trims the result.
func (p prompts) render(name string, d PromptData) (string, error) {
	t, ok := p[name]
	if !ok {
		return "", fmt.Errorf("render prompt %s: no such template", name)
	}
	if t.parts != nil {
		return t.plain(&d), nil
	}
	var b strings.Builder
	if err := t.t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("render prompt %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()), nil
}

// plain renders a template of text and fields, trimmed, as Execute would.
func (t *prompt) plain(d *PromptData) string {
	if len(t.parts) == 1 {
		return strings.TrimSpace(t.parts[0].of(d))
	}
	var b strings.Builder
	for _, part := range t.parts {
		b.WriteString(part.of(d))
	}
	return strings.TrimSpace(b.String())
}

// of is the part's text over d.
func (p promptPart) of(d *PromptData) string {
	if p.field == "" {
		return p.text
	}
	s, _ := d.fieldText(p.field) // plainParts took only fields fieldText knows
	return s
}
