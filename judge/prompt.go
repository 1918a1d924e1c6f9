package judge

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
)

// Keys of the prompt templates, for Config.Prompts.
const (
	PromptPairwiseSystem  = "pairwise_system"  // the rubric and answer format for two answers
	PromptPairwiseUser    = "pairwise_user"    // fields: .Request, .A, .B
	PromptPointwiseSystem = "pointwise_system" // the rubric and answer format for one answer
	PromptPointwiseUser   = "pointwise_user"   // fields: .Request, .Answer
)

//go:embed prompts/*.tmpl
var promptFS embed.FS

// pairData and pointData are what the user templates see.
type pairData struct{ Request, A, B string }
type pointData struct{ Request, Answer string }

// DefaultPrompt returns the built-in template source for key, or an error
// naming the key when there is none.
func DefaultPrompt(key string) (string, error) {
	b, err := promptFS.ReadFile("prompts/" + key + ".tmpl")
	if err != nil {
		return "", fmt.Errorf("prompt %q: unknown key, want one of %s", key, knownPromptKeys())
	}
	return string(b), nil
}

// parsePrompt parses src as the template for key.
// By rendering marked values, it checks that a user template shows every
// field it must.
func parsePrompt(key, src string) (*template.Template, error) {
	if _, err := DefaultPrompt(key); err != nil {
		return nil, err
	}
	t, err := template.New(key).Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, fmt.Errorf("prompt %q: %w", key, err)
	}
	var data any
	var need []string
	switch key {
	case PromptPairwiseUser:
		data = pairData{Request: "\x00request\x00", A: "\x00a\x00", B: "\x00b\x00"}
		need = []string{"request", "a", "b"}
	case PromptPointwiseUser:
		data = pointData{Request: "\x00request\x00", Answer: "\x00answer\x00"}
		need = []string{"request", "answer"}
	default:
		data = struct{}{}
	}
	var sb strings.Builder
	if err := t.Execute(&sb, data); err != nil {
		return nil, fmt.Errorf("prompt %q: %w", key, err)
	}
	for _, f := range need {
		if !strings.Contains(sb.String(), "\x00"+f+"\x00") {
			return nil, fmt.Errorf("prompt %q: never shows the %s", key, f)
		}
	}
	if strings.TrimSpace(sb.String()) == "" {
		return nil, fmt.Errorf("prompt %q: renders empty", key)
	}
	return t, nil
}

// prompts holds the parsed templates a Judge uses.
type prompts struct {
	pairSystem, pointSystem string // rendered once
	pairUserT, pointUserT   *template.Template
}

func loadPrompts(overrides map[string]string) (*prompts, error) {
	get := func(key string) (*template.Template, error) {
		src, ok := overrides[key]
		if !ok {
			var err error
			if src, err = DefaultPrompt(key); err != nil {
				return nil, err
			}
		}
		return parsePrompt(key, src)
	}
	render := func(key string) (string, error) {
		t, err := get(key)
		if err != nil {
			return "", err
		}
		var sb strings.Builder
		if err := t.Execute(&sb, struct{}{}); err != nil {
			return "", fmt.Errorf("prompt %q: %w", key, err)
		}
		return sb.String(), nil
	}
	p := &prompts{}
	var err error
	if p.pairSystem, err = render(PromptPairwiseSystem); err != nil {
		return nil, err
	}
	if p.pointSystem, err = render(PromptPointwiseSystem); err != nil {
		return nil, err
	}
	if p.pairUserT, err = get(PromptPairwiseUser); err != nil {
		return nil, err
	}
	if p.pointUserT, err = get(PromptPointwiseUser); err != nil {
		return nil, err
	}
	return p, nil
}

// pairwise renders the user message showing a first and b second.
func (p *prompts) pairwise(request, a, b string) (string, error) {
	var sb strings.Builder
	if err := p.pairUserT.Execute(&sb, pairData{Request: request, A: a, B: b}); err != nil {
		return "", fmt.Errorf("render prompt %q: %w", PromptPairwiseUser, err)
	}
	return sb.String(), nil
}

// pointwise renders the user message showing one answer.
func (p *prompts) pointwise(request, answer string) (string, error) {
	var sb strings.Builder
	if err := p.pointUserT.Execute(&sb, pointData{Request: request, Answer: answer}); err != nil {
		return "", fmt.Errorf("render prompt %q: %w", PromptPointwiseUser, err)
	}
	return sb.String(), nil
}
