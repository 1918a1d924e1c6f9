package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn"
	"github.com/delegatelab/delegate/tokenizer"
)

func tinyServer(t *testing.T) string {
	t.Helper()
	cfg := nn.Config{Vocab: tokenizer.VocabSize, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 64, Context: 1024}.WithDefaults()
	p, err := nn.Alloc(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.Init(3)
	m, err := local.New(p, local.Config{Name: "m", MaxBatch: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return serve(t, m).URL
}

const calcTool = `"tools":[{"type":"function","function":{"name":"calc","parameters":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}}]`

// A request the server cannot honour is a 400 naming the parameter, over real HTTP.
// That holds whether the format's rules or the local model refuse it.
func TestServerConstraintRefusals(t *testing.T) {
	url := tinyServer(t) + "/v1/chat/completions"
	msgs := `"model":"m","messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, body, param string
	}{
		{"named tool not declared", `{` + msgs + `,` + calcTool + `,"tool_choice":{"type":"function","function":{"name":"search"}}}`, "tool_choice"},
		{"required without tools", `{` + msgs + `,"tool_choice":"required"}`, "tool_choice"},
		{"schema keyword", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"string","format":"date"}}}}`, "response_format.json_schema.schema"},
		{"tool schema keyword", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"oneOf":[]}}}],"tool_choice":"required"}`, "tools[0].function.parameters"},
		{"json_schema without a name", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name"},
		{"format type", `{` + msgs + `,"response_format":{"type":"xml"}}`, "response_format.type"},
		{"logit bias value", `{` + msgs + `,"logit_bias":{"5":101}}`, "logit_bias"},
		{"logit bias key", `{` + msgs + `,"logit_bias":{"a":1}}`, "logit_bias"},
		{"logit bias past the vocabulary", `{` + msgs + `,"logit_bias":{"100000":1}}`, "logit_bias"},
		{"frequency penalty", `{` + msgs + `,"frequency_penalty":2.5}`, "frequency_penalty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, "POST", url, "", tt.body)
			if status != 400 {
				t.Fatalf("status %d, want 400: %s", status, body)
			}
			e := checkErrorShape(t, body)
			if e.Error.Param == nil || *e.Error.Param != tt.param {
				t.Errorf("param %v, want %q: %s", e.Error.Param, tt.param, body)
			}
		})
	}
}

// A required call comes back as a call to the declared tool with valid arguments.
// With tool_choice none the answer is text with no call syntax.
func TestServerToolChoice(t *testing.T) {
	url := tinyServer(t) + "/v1/chat/completions"
	msgs := `"model":"m","messages":[{"role":"user","content":"x"}],"temperature":1,"max_tokens":600`
	for seed := range 4 {
		s := `,"seed":` + string(rune('0'+seed))
		status, _, body := do(t, "POST", url, "", `{`+msgs+s+`,`+calcTool+`,"tool_choice":"required","parallel_tool_calls":false}`)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		var resp struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "calc" {
			t.Fatalf("want one call to calc: %s", body)
		}
		var args struct{ N *int }
		if err := json.Unmarshal([]byte(c.Message.ToolCalls[0].Function.Arguments), &args); err != nil || args.N == nil {
			t.Fatalf("arguments %q: %v", c.Message.ToolCalls[0].Function.Arguments, err)
		}

		// +100 on <|tool_call|> would open a call at once; none masks it.
		bias := `,"logit_bias":{"263":100}`
		status, _, body = do(t, "POST", url, "", `{`+msgs+s+`,`+calcTool+`,"tool_choice":"none"`+bias+`}`)
		if status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if strings.Contains(body, "tool_calls") || strings.Contains(body, "calc") {
			t.Fatalf("tool_choice none: %s", body)
		}
	}
}
