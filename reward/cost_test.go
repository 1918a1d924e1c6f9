package reward

import (
	"math"
	"strings"
	"testing"
	"time"
)

// same compares rewards to 1e-12, NaN equal to NaN.
func same(got, want float64) bool {
	if math.IsNaN(got) || math.IsNaN(want) {
		return math.IsNaN(got) && math.IsNaN(want)
	}
	return math.Abs(got-want) < 1e-12
}

func correct(ok bool) Outcome { return Outcome{FormatOK: true, Correct: new(ok)} }

func with(o Outcome, f func(*Outcome)) Outcome { f(&o); return o }

// The golden values below are worked by hand in each comment.
func TestSuccessGated(t *testing.T) {
	s := SuccessGated{Lambda: 0.5, CostScale: 0.01, FormatPenalty: -0.5}
	tests := []struct {
		name string
		o    Outcome
		want float64
	}{
		// 1 - 0.5·(0.004/0.01) = 1 - 0.2
		{"correct", with(correct(true), func(o *Outcome) { o.Cost = 0.004 }), 0.8},
		// the cost ratio is clipped at 1: 1 - 0.5·1
		{"correct and dear", with(correct(true), func(o *Outcome) { o.Cost = 0.05 }), 0.5},
		{"wrong and cheap", with(correct(false), func(o *Outcome) { o.Cost = 0 }), 0},
		{"wrong and dear", with(correct(false), func(o *Outcome) { o.Cost = 0.05 }), 0},
		// a judged win: 0.4 - 0.5·(0.002/0.01) = 0.4 - 0.1
		{"judged win", with(judged(40), func(o *Outcome) { o.Cost = 0.002 }), 0.3},
		{"judged loss", with(judged(-40), func(o *Outcome) { o.Cost = 0.002 }), 0},
		{"format failure", Outcome{FailedStage: StageAnswer, Cost: 0.004}, -0.5},
		{"error", Outcome{Error: "boom"}, math.NaN()},
		{"no verdict", Outcome{FormatOK: true}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Reward(tt.o); !same(got, tt.want) {
				t.Errorf("Reward = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEfficiency(t *testing.T) {
	e := Efficiency{CostWeight: 0.2, CostScale: 0.01, LatencyWeight: 0.1, LatencyScale: 10 * time.Second, FormatPenalty: -1}
	tests := []struct {
		name string
		o    Outcome
		want float64
	}{
		// 1 - 0.2·(0.005/0.01) - 0.1·(4s/10s) = 1 - 0.1 - 0.04
		{"correct", with(correct(true), func(o *Outcome) { o.Cost, o.Latency = 0.005, 4*time.Second }), 0.86},
		// 0 - 0.2·1 - 0.1·1: both ratios clipped
		{"wrong and slow", with(correct(false), func(o *Outcome) { o.Cost, o.Latency = 1, time.Hour }), -0.3},
		// -0.2 - 0.2·0.5 - 0
		{"judged", with(judged(-20), func(o *Outcome) { o.Cost = 0.005 }), -0.3},
		// -1 - 0.2·0.5 - 0.1·0.4
		{"format failure", Outcome{Truncated: true, FormatOK: true, Cost: 0.005, Latency: 4 * time.Second}, -1.14},
		{"error", Outcome{Error: "boom"}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.Reward(tt.o); !same(got, tt.want) {
				t.Errorf("Reward = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCriticalPathReward(t *testing.T) {
	c := CriticalPath{LatencyWeight: 0.2, LatencyScale: 10 * time.Second, Bonus: 0.4, AnnealSteps: 100, FormatPenalty: -1}
	// Five calls, two on the critical path of 5s: parallelism 1 - 2/5 = 0.6.
	par := func(o *Outcome) { o.AllCalls, o.CriticalCalls, o.CriticalPath = 5, 2, 5*time.Second }
	tests := []struct {
		name string
		o    Outcome
		want float64
	}{
		// 1 - 0.2·0.5 + 0.4·1·0.6 = 1 - 0.1 + 0.24
		{"step 0", with(correct(true), par), 1.14},
		// bonus 0.4·(1 - 25/100) = 0.3: 1 - 0.1 + 0.3·0.6
		{"step 25", with(correct(true), func(o *Outcome) { par(o); o.Step = 25 }), 1.08},
		{"annealed away", with(correct(true), func(o *Outcome) { par(o); o.Step = 100 }), 0.9},
		{"past the end", with(correct(true), func(o *Outcome) { par(o); o.Step = 500 }), 0.9},
		// one call: no parallelism; 0 - 0.2·(2s/10s)
		{"wrong, one call", with(correct(false), func(o *Outcome) { o.AllCalls, o.CriticalCalls, o.CriticalPath = 1, 1, 2*time.Second }), -0.04},
		{"no calls", correct(true), 1},
		// -1 - 0.1, no bonus
		{"format failure", with(Outcome{FailedStage: StagePlan}, par), -1.1},
		{"error", Outcome{Error: "boom"}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.Reward(tt.o); !same(got, tt.want) {
				t.Errorf("Reward = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPerCall(t *testing.T) {
	p := PerCall{Fees: map[string]float64{"big": 0.003, "small": 0.0005}, Lambda: 1, CostScale: 0.01, FormatPenalty: -1}
	tests := []struct {
		name string
		o    Outcome
		want float64
	}{
		// spent 1·0.003 + 4·0.0005 = 0.005; 1 - 0.005/0.01
		{"correct", with(correct(true), func(o *Outcome) { o.ModelCalls = map[string]int{"big": 1, "small": 4} }), 0.5},
		// spent 2·0.003 = 0.006; 0 - 0.6
		{"wrong", with(correct(false), func(o *Outcome) { o.ModelCalls = map[string]int{"big": 2} }), -0.6},
		// -1 - 0.05
		{"format failure", Outcome{FailedStage: StageAnswer, ModelCalls: map[string]int{"small": 1}}, -1.05},
		{"unpriced model", with(correct(true), func(o *Outcome) { o.ModelCalls = map[string]int{"other": 1} }), math.NaN()},
		{"no calls", correct(true), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Reward(tt.o); !same(got, tt.want) {
				t.Errorf("Reward = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigSelects(t *testing.T) {
	o := with(correct(true), func(o *Outcome) {
		o.Cost, o.Tokens, o.Calls = 0.004, 1000, 2
		o.Latency, o.CriticalPath, o.AllCalls, o.CriticalCalls = 30*time.Second, 30*time.Second, 3, 2
		o.ModelCalls = map[string]int{"m": 3}
	})
	tests := []struct {
		kind string
		want float64
	}{
		// DefaultGraded: 1 - 1e-5·1000 - 0.01·2
		{"", 0.97},
		{KindGraded, 0.97},
		// 1 - 0.5·0.4
		{KindSuccessGated, 0.8},
		// 1 - 0.2·0.4 - 0.1·0.5
		{KindEfficiency, 0.87},
		// 1 - 0.2·0.5 + 0.2·(1 - 2/3)
		{KindCriticalPath, 1 - 0.1 + 0.2/3},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			c := DefaultConfig()
			c.Kind = tt.kind
			f, err := c.Func()
			if err != nil {
				t.Fatalf("Func: %v", err)
			}
			if got := f(o); !same(got, tt.want) {
				t.Errorf("reward = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("per_call", func(t *testing.T) {
		c := DefaultConfig()
		c.Kind = KindPerCall
		if _, err := c.Func(); err == nil || !strings.Contains(err.Error(), "per_call.fees") {
			t.Fatalf("Func without fees: err %v, want one naming per_call.fees", err)
		}
		c.PerCall.Fees = map[string]float64{"m": 0.001}
		f, err := c.Func()
		if err != nil {
			t.Fatalf("Func: %v", err)
		}
		// 1 - 1·0.003/0.01
		if got := f(o); !same(got, 0.7) {
			t.Errorf("reward = %v, want 0.7", got)
		}
	})
}

func TestConfigValidateNamesKeys(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"unknown kind", func(c *Config) { c.Kind = "cheap" }, []string{`kind "cheap"`}},
		{"success gated", func(c *Config) {
			c.Kind = KindSuccessGated
			c.SuccessGated.CostScale, c.SuccessGated.Lambda = 0, -1
		}, []string{"success_gated.cost_scale 0", "success_gated.lambda -1"}},
		{"efficiency", func(c *Config) {
			c.Kind = KindEfficiency
			c.Efficiency.LatencyScale, c.Efficiency.CostWeight = 0, math.NaN()
		}, []string{"efficiency.latency_scale 0s", "efficiency.cost_weight NaN"}},
		{"critical path", func(c *Config) {
			c.Kind = KindCriticalPath
			c.CriticalPath.AnnealSteps, c.CriticalPath.FormatPenalty = 0, 1
		}, []string{"critical_path.anneal_steps 0", "critical_path.format_penalty 1"}},
		{"per call", func(c *Config) {
			c.Kind = KindPerCall
			c.PerCall.Fees = map[string]float64{"m": -0.1}
			c.PerCall.CostScale = math.Inf(1)
		}, []string{"per_call.fees.m -0.1", "per_call.cost_scale +Inf"}},
		// Only the selected kind's section is checked.
		{"other section ignored", func(c *Config) { c.Efficiency.CostScale = 0 }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want errors naming %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v, want it to name %q", err, w)
				}
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	c := DefaultConfig()
	if got, want := c.Describe(), `graded reward {"lambda":0.00001,"cost_unit":"tokens","mu":0.01,"format_penalty":-1}`; got != want {
		t.Errorf("Describe = %s, want %s", got, want)
	}
	c.Kind = KindSuccessGated
	if got, want := c.Describe(), `success_gated reward {"lambda":0.5,"cost_scale":0.01,"format_penalty":0}`; got != want {
		t.Errorf("Describe = %s, want %s", got, want)
	}
}
