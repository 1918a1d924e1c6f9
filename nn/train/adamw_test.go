package train

import (
	"math"
	"testing"

	"github.com/delegatelab/delegate/nn"
)

func TestAdamWUpdate(t *testing.T) {
	c := tinyConfig(false)
	p, _ := nn.Alloc(c)
	g, _ := nn.Alloc(c)
	s, err := NewAdamState(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Data {
		p.Data[i] = 2
		g.Data[i] = 0.5
	}
	a := AdamW{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1}
	const lr = 0.01
	if err := a.Update(p, g, s, lr); err != nil {
		t.Fatal(err)
	}
	// step 1: bias-corrected moments are g and g², so the Adam step is lr·sign(g)
	decayed := 2*(1-lr*0.1) - lr*0.5/(0.5+1e-8)
	plain := 2 - lr*0.5/(0.5+1e-8)
	check := func(name string, v []float32, want float64) {
		t.Helper()
		for i, x := range v {
			if math.Abs(float64(x)-want) > 1e-6 {
				t.Fatalf("%s[%d] = %v, want %v", name, i, x, want)
			}
		}
	}
	names, views := views(p)
	for i, name := range names {
		want := decayed
		if len(views[i]) == c.Dim { // norm gains take no decay
			want = plain
		}
		check(name, views[i], want)
	}
	// step 2 with a different gradient, one element by hand
	g.Data[0] = -1
	m := 0.9*(0.1*0.5) + 0.1*-1
	v := 0.99*(0.01*0.25) + 0.01*1
	mh, vh := m/(1-0.9*0.9), v/(1-0.99*0.99)
	want := decayed*(1-lr*0.1) - lr*mh/(math.Sqrt(vh)+1e-8)
	if err := a.Update(p, g, s, lr); err != nil {
		t.Fatal(err)
	}
	if got := float64(p.Data[0]); math.Abs(got-want) > 1e-6 {
		t.Errorf("step 2 param = %v, want %v", got, want)
	}
	if s.Steps != 2 {
		t.Errorf("steps = %d, want 2", s.Steps)
	}
}

func TestAdamWDecaySpans(t *testing.T) {
	for _, tied := range []bool{false, true} {
		c := tinyConfig(tied)
		spans := decaySpans(c)
		p, _ := nn.Alloc(c)
		for _, sp := range spans {
			for i := sp.Lo; i < sp.Hi; i++ {
				p.Data[i] = 1
			}
		}
		names, views := views(p)
		for i, name := range names {
			want := float32(1)
			if len(views[i]) == c.Dim {
				want = 0
			}
			for _, v := range views[i] {
				if v != want {
					t.Fatalf("tied=%v: %s marked %v for decay, want %v", tied, name, v, want)
				}
			}
		}
	}
}

func TestAdamWValidate(t *testing.T) {
	tests := []struct {
		name string
		a    AdamW
		ok   bool
	}{
		{"default", DefaultAdamW(), true},
		{"beta1 one", AdamW{Beta1: 1, Beta2: 0.9, Eps: 1e-8}, false},
		{"beta2 negative", AdamW{Beta1: 0.9, Beta2: -0.1, Eps: 1e-8}, false},
		{"eps zero", AdamW{Beta1: 0.9, Beta2: 0.9}, false},
		{"decay nan", AdamW{Beta1: 0.9, Beta2: 0.9, Eps: 1e-8, WeightDecay: math.NaN()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.a.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestTrainSchedule(t *testing.T) {
	s := Schedule{Warmup: 10, Total: 110, MaxLR: 1e-3, MinLR: 1e-4}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		step int
		want float64
	}{
		{0, 1e-4},    // first warmup step: MaxLR/Warmup
		{4, 5e-4},    // linear
		{9, 1e-3},    // warmup reaches MaxLR
		{10, 1e-3},   // cosine starts at MaxLR
		{60, 5.5e-4}, // halfway: mean of MaxLR and MinLR
		{110, 1e-4},  // end: MinLR
		{1000, 1e-4}, // after: MinLR
	}
	for _, tt := range tests {
		if got := s.LR(tt.step); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("LR(%d) = %v, want %v", tt.step, got, tt.want)
		}
	}
	for step := 10; step < 110; step++ {
		if s.LR(step+1) > s.LR(step) {
			t.Fatalf("LR rises after warmup: LR(%d) = %v > LR(%d) = %v", step+1, s.LR(step+1), step, s.LR(step))
		}
	}
	noWarm := Schedule{Total: 10, MaxLR: 1, MinLR: 0}
	if got := noWarm.LR(0); got != 1 {
		t.Errorf("no warmup: LR(0) = %v, want 1", got)
	}
	for _, bad := range []Schedule{
		{Warmup: -1, Total: 10, MaxLR: 1},
		{Warmup: 5, Total: 4, MaxLR: 1},
		{Total: 10, MaxLR: 0},
		{Total: 10, MaxLR: 1, MinLR: 2},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", bad)
		}
	}
}
