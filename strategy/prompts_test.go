package strategy

import (
	"reflect"
	"strings"
	"testing"
)

// executed renders the named template through text/template, as render
// did for every template before its plain path.
func executed(t *testing.T, p prompts, name string, d PromptData) string {
	t.Helper()
	var b strings.Builder
	if err := p[name].t.Execute(&b, d); err != nil {
		t.Fatalf("execute %s: %v", name, err)
	}
	return strings.TrimSpace(b.String())
}

func TestRenderMatchesExecute(t *testing.T) {
	overrides := map[string]string{
		"route_user":      "  Request: {{.Request}}, {{.K}} peers, round {{.Round}}\n",
		"weak_user":       "{{.Question}}{{.Question}}",
		"weak_system":     "",
		"single_user":     "{{- .Request -}}",
		"single_system":   "{{.Request | len}} bytes",
		"peer_user":       "{{.Request}} {{.Index}}",
		"subagent_system": "{{.Budget}} tokens, {{.Min}}..{{.Max}}, {{.Subtask}}, {{.Reasoning}}, {{.Leader}}, {{.Previous}}",
	}
	data := []PromptData{
		sampleData,
		{},
		{Request: "  spaced request \n", Question: "Q?\n\n", K: -3, Round: 12, Index: 7},
		{Request: "ünïcode {{.Request}} <b>&amp;</b>", Question: "\t"},
	}
	for _, set := range []struct {
		name      string
		overrides map[string]string
	}{{"defaults", nil}, {"overrides", overrides}} {
		p, err := newPrompts(set.overrides)
		if err != nil {
			t.Fatal(err)
		}
		for name, pr := range p {
			t.Run(set.name+"/"+name, func(t *testing.T) {
				for i, d := range data {
					got, err := p.render(name, d)
					if err != nil {
						t.Fatalf("data %d: render: %v", i, err)
					}
					if want := executed(t, p, name, d); got != want {
						t.Errorf("data %d (plain path %v): got %q, want %q", i, pr.parts != nil, got, want)
					}
				}
			})
		}
	}
}

// TestRenderPlainPath checks which templates skip text/template: the
// route strategy's four, which run ten times a rollout, must.
func TestRenderPlainPath(t *testing.T) {
	p, err := newPrompts(map[string]string{"single_user": "{{.Request | len}}", "peer_user": "{{if .Request}}x{{end}}"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"route_system", true}, {"route_user", true}, {"weak_system", true}, {"weak_user", true},
		{"single_user", false}, {"peer_user", false}, {"leader_user", false},
	} {
		if got := p[tt.name].parts != nil; got != tt.want {
			t.Errorf("%s: plain path %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestFieldTextKnowsEveryField keeps fieldText in step with PromptData.
func TestFieldTextKnowsEveryField(t *testing.T) {
	ty := reflect.TypeFor[PromptData]()
	for i := range ty.NumField() {
		f := ty.Field(i)
		_, ok := (&PromptData{}).fieldText(f.Name)
		want := f.Type.Kind() == reflect.String || f.Type.Kind() == reflect.Int
		if ok != want {
			t.Errorf("fieldText(%q) known %v, want %v (kind %s)", f.Name, ok, want, f.Type.Kind())
		}
	}
}
