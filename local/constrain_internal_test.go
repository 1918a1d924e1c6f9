package local

import (
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/constrain"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/tokenizer"
)

// TestQwenRequiredCallsParse checks that required-call walks parse as valid calls.
// It walks random tokens of a Qwen vocabulary that the constraint allows and
// parses the reply with the Qwen codec. Every finished walk is calls to the
// declared tools with valid arguments, whatever tokens spelled them.
func TestQwenRequiredCallsParse(t *testing.T) {
	dir := filepath.Join("..", "nn", "infer", "testdata", "hf", "qwen3-qknorm")
	tok, err := tokenizer.LoadHF(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := tokenizer.ParseChatFormat(infer.HFChatTemplate("qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := newHFCodec(tok, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	calc, err := constrain.Compile([]byte(`{"type":"object","properties":{"n":{"type":"integer"},"op":{"enum":["add","mul"]}},"required":["n","op"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	spec := &constrain.Spec{Syntax: constrain.Qwen, Required: true, Tools: []constrain.Tool{{Name: "calc", Args: calc}, {Name: "ca"}}}
	if err := spec.Check(); err != nil {
		t.Fatal(err)
	}
	v := c.syms(272).markPlain()
	finished := 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 3))
		con := &replyConstraint{r: constrain.NewReply(spec), try: constrain.NewReply(spec), v: v}
		var body []int
		for range 3000 {
			var ok []int
			stop := -1
			for id := range 272 {
				if con.Allows(id) {
					if v.stop[id] {
						stop = id
					}
					ok = append(ok, id)
				}
			}
			if len(ok) == 0 {
				t.Fatalf("seed %d: no token allowed after %v", seed, body)
			}
			id := ok[rng.IntN(len(ok))]
			if stop >= 0 && rng.IntN(2) == 0 {
				id = stop
			}
			if v.stop[id] {
				body = append(body, -1)
				break
			}
			con.Accept(id)
			body = append(body, id)
		}
		if len(body) == 0 || body[len(body)-1] != -1 {
			continue // the walk ran out of steps
		}
		finished++
		msg := c.parse(body[:len(body)-1])
		if strings.TrimSpace(msg.Content) != "" || len(msg.ToolCalls) == 0 {
			t.Fatalf("seed %d: content %q, calls %v", seed, msg.Content, msg.ToolCalls)
		}
		for _, call := range msg.ToolCalls {
			var args map[string]any
			if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
				t.Fatalf("seed %d: call %+v: %v", seed, call, err)
			}
			switch call.Name {
			case "ca":
			case "calc":
				if _, ok := args["n"].(float64); !ok || (args["op"] != "add" && args["op"] != "mul") || len(args) != 2 {
					t.Fatalf("seed %d: calc arguments %s", seed, call.Arguments)
				}
			default:
				t.Fatalf("seed %d: call to %q", seed, call.Name)
			}
		}
	}
	if finished < 30 {
		t.Errorf("only %d of 60 walks finished", finished)
	}
}
