package infer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

// The configs under testdata/hfconfig are written by hand. They are
// released models' config.json in transformers v4's layout, with
// rope_theta and rope_scaling, and v5's, with rope_parameters. Variants
// must be read alike or refused by name.

// TestParseHFConfigRopeLayouts checks what each config fixture parses to.
// It covers the rope base and scaling from either layout, Qwen3's head
// width without head_dim, and Qwen2's biases whatever attention_bias says.
func TestParseHFConfigRopeLayouts(t *testing.T) {
	llama3 := &nn.RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}
	linear4 := &nn.RopeScaling{Type: "linear", Factor: 4}
	tests := []struct {
		file     string
		theta    float64
		scaling  *nn.RopeScaling
		headSize int
		qkvBias  bool
	}{
		{"v4-llama3.json", 500000, llama3, 0, false},
		{"v5-llama3.json", 500000, llama3, 0, false},
		{"v5-default.json", 1e6, nil, 0, true},
		{"v5-untyped.json", 1e6, nil, 0, true},
		{"v5-linear.json", 1e6, linear4, 0, true},
		{"v5-both-agree.json", 1e6, linear4, 0, true},
		{"qwen3-no-head-dim.json", 1e6, nil, 128, false},
		{"qwen3-no-head-dim-v5.json", 1e6, nil, 128, false},
		{"qwen2-attention-bias.json", 1e6, nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, _, err := parseHFConfig(readHFConfig(t, tt.file), HFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.RopeTheta != tt.theta {
				t.Errorf("rope theta = %g; want %g", c.RopeTheta, tt.theta)
			}
			if !sameScaling(c.RopeScaling, tt.scaling) {
				t.Errorf("rope scaling = %+v; want %+v", c.RopeScaling, tt.scaling)
			}
			if c.HeadSize != tt.headSize {
				t.Errorf("head size = %d; want %d", c.HeadSize, tt.headSize)
			}
			if c.QKVBias != tt.qkvBias {
				t.Errorf("q/k/v bias = %v; want %v", c.QKVBias, tt.qkvBias)
			}
		})
	}
}

// TestParseHFConfigRopeRefusals checks that what the engine does not
// compute is refused, naming it, in either layout.
func TestParseHFConfigRopeRefusals(t *testing.T) {
	tests := []struct{ file, want string }{
		{"v4-dynamic.json", `rope_scaling type "dynamic" is not supported`},
		{"v5-dynamic.json", `rope_parameters type "dynamic" is not supported`},
		{"v5-yarn.json", `rope_parameters type "yarn" is not supported`},
		{"v5-longrope.json", `rope_parameters type "longrope" is not supported`},
		{"v5-per-layer.json", "per layer type are not supported"},
		{"v5-partial.json", "partial_rotary_factor 0.5 is not supported"},
		{"v5-theta-disagree.json", "rope_theta 10000 and rope_parameters rope_theta 1e+06 disagree"},
		{"v5-scaling-disagree.json", "rope_scaling"},
		{"qwen3-attention-bias.json", "attention_bias true is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, _, err := parseHFConfig(readHFConfig(t, tt.file), HFOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func readHFConfig(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hfconfig", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLoadHFV5LayoutMatchesReference checks fixtures rewritten in transformers v5's config layout.
// That layout moves rope_theta and rope_scaling into rope_parameters. The
// config and the reference's logits must stay the same.
func TestLoadHFV5LayoutMatchesReference(t *testing.T) {
	for _, fx := range hfFixtures {
		t.Run(fx.name, func(t *testing.T) {
			v4, _, err := LoadHF(filepath.Join("testdata", "hf", fx.name), HFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dir := copyFixture(t, fx.name)
			editConfig(t, dir, func(m map[string]any) {
				rp := map[string]any{"rope_type": "default"}
				if rs, ok := m["rope_scaling"].(map[string]any); ok {
					for k, v := range rs {
						rp[k] = v
					}
					if typ, ok := rs["type"]; ok {
						delete(rp, "type")
						rp["rope_type"] = typ
					}
				}
				if th, ok := m["rope_theta"]; ok {
					rp["rope_theta"] = th
				}
				delete(m, "rope_theta")
				delete(m, "rope_scaling")
				m["rope_parameters"] = rp
			})
			b, err := os.ReadFile(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var probe map[string]json.RawMessage
			if err := json.Unmarshal(b, &probe); err != nil || probe["rope_theta"] != nil || probe["rope_parameters"] == nil {
				t.Fatalf("config not in the v5 layout: %s", b)
			}
			w, _, err := LoadHF(dir, HFOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, want := w.Config(), v4.Config()
			if !sameScaling(got.RopeScaling, want.RopeScaling) {
				t.Errorf("rope scaling = %+v; v4 layout %+v", got.RopeScaling, want.RopeScaling)
			}
			got.RopeScaling, want.RopeScaling = nil, nil
			if got != want {
				t.Errorf("config = %+v; v4 layout %+v", got, want)
			}
			ref := readHFReference(t, dir)
			logits := hfPromptLogits(t, w, ref.Prompt)
			v := w.Config().Vocab
			for i, row := range ref.Logits {
				for j, r := range row {
					if d := math.Abs(float64(logits[i*v+j])-r) / max(1, math.Abs(r)); d > hfLogitTol {
						t.Fatalf("logit at position %d of token %d = %v, reference %v", i, j, logits[i*v+j], r)
					}
				}
			}
		})
	}
}
