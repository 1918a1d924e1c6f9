package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// frontierRecords are hand-made results on four tasks whose frontier,
// oracle and mixing line are worked out by hand in TestFrontier.
//
//	arm      right     $ per item  accuracy  $/item
//	strong   T T T F   1           0.75      1
//	weak     T F F T   0.25        0.50      0.25
//	router   T T F F   0.5         0.50      0.5   (weak is as good, cheaper)
//	twin     T T F F   0.5         0.50      0.5   (router's point exactly)
//	best     T T T T   2           1.00      2
//	broken   every item an error                   (left out)
func frontierRecords() ([]Arm, []Record) {
	arms := []Arm{{Name: "strong", Role: RoleStrong}, {Name: "weak", Role: RoleWeak}, {Name: "router"}, {Name: "twin"}, {Name: "best"}, {Name: "broken"}}
	right := map[string]string{"strong": "TTTF", "weak": "TFFT", "router": "TTFF", "twin": "TTFF", "best": "TTTT", "broken": "FFFF"}
	cost := map[string]float64{"strong": 1, "weak": 0.25, "router": 0.5, "twin": 0.5, "best": 2, "broken": 0}
	var recs []Record
	for _, a := range arms {
		for i, c := range right[a.Name] {
			r := Record{Arm: a.Name, Strategy: "single", TaskID: string(rune('a' + i)), Correct: c == 'T'}
			r.Total.Cost, r.Total.Calls = cost[a.Name], 1
			if a.Name == "broken" {
				r.Error, r.Total.Calls = "connection refused", 0
			}
			recs = append(recs, r)
		}
	}
	return arms, recs
}

func frontierReport(t *testing.T) *Report {
	t.Helper()
	arms, recs := frontierRecords()
	rep, err := Summarize("", nil, arms, recs)
	if err != nil {
		t.Fatalf("Summarize: %v", err)
	}
	return rep
}

func TestFrontier(t *testing.T) {
	f, err := frontierReport(t).Frontier("", "")
	if err != nil {
		t.Fatal(err)
	}
	var pareto []string
	for _, p := range f.Pareto {
		pareto = append(pareto, p.Name)
	}
	// router and twin sit at (0.5, 0.5), which weak beats at (0.25, 0.5).
	if got, want := strings.Join(pareto, ","), "weak,strong,best"; got != want {
		t.Errorf("frontier %s, want %s", got, want)
	}
	if got, want := strings.Join(f.LeftOut, "; "), "broken: every item failed"; got != want {
		t.Errorf("left out %q, want %q", got, want)
	}
	if len(f.Arms) != 5 {
		t.Errorf("%d arms drawn, want 5 (not the oracle router row, not broken)", len(f.Arms))
	}
	// Per task: a both right, weak cheaper (0.25); b, c only strong (1);
	// d only weak (0.25): all right at (0.25 + 1 + 1 + 0.25) / 4.
	if o := f.Oracle; o == nil || o.Accuracy != 1 || o.Dollars != 0.625 {
		t.Errorf("oracle %+v, want accuracy 1 at $0.625", o)
	}
	// Half the items at random to strong: halfway from weak to strong.
	if d, a := f.MixAt(0.5); d != 0.625 || a != 0.625 {
		t.Errorf("mixing at 0.5: $%v, accuracy %v; want 0.625, 0.625", d, a)
	}
	if d, a := f.MixAt(0); d != 0.25 || a != 0.5 {
		t.Errorf("mixing at 0: $%v, accuracy %v; want weak's 0.25, 0.5", d, a)
	}
}

func TestFrontierSelect(t *testing.T) {
	rep := frontierReport(t)
	// router and best instead of the marked arms. Per task: a both right,
	// router cheaper (0.5); b both right (0.5); c only best (2); d only
	// best (2): all right at 5/4.
	f, err := rep.Frontier("best", "router")
	if err != nil {
		t.Fatal(err)
	}
	if o := f.Oracle; o == nil || o.Accuracy != 1 || o.Dollars != 1.25 {
		t.Errorf("oracle %+v, want accuracy 1 at $1.25", o)
	}
	if f.Mix[0].Name != "router" || f.Mix[1].Name != "best" {
		t.Errorf("mixing from %s to %s, want router to best", f.Mix[0].Name, f.Mix[1].Name)
	}
	// A failed arm has no oracle: the frontier is drawn without one.
	if f, err := rep.Frontier("broken", "weak"); err != nil || f.Oracle != nil || f.Mix != nil {
		t.Errorf("with broken as strong: err %v, oracle %v, mix %v; want neither", err, f.Oracle, f.Mix)
	}
	for _, pair := range [][2]string{{"nobody", "weak"}, {"weak", "weak"}} {
		if _, err := rep.Frontier(pair[0], pair[1]); err == nil {
			t.Errorf("Frontier(%q, %q): no error", pair[0], pair[1])
		}
	}
}

// TestFrontierGolden pins the plot's data; go test -update rewrites it.
func TestFrontierGolden(t *testing.T) {
	var b bytes.Buffer
	if err := frontierReport(t).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "frontier.json.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("%s differs (run go test -update after checking the change):\ngot:\n%s\nwant:\n%s", golden, b.String(), want)
	}
	var doc struct {
		Rows []struct {
			Arm         string
			CostOfPass  *float64 `json:"cost_of_pass"`
			NoneCorrect bool     `json:"none_correct"`
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc.Rows {
		switch r.Arm {
		case "strong": // $1 per item at 3/4 right
			if r.CostOfPass == nil || math.Abs(*r.CostOfPass-4.0/3) > 1e-12 {
				t.Errorf("strong: cost of pass %v, want 4/3", r.CostOfPass)
			}
		case "broken":
			if r.CostOfPass != nil || !r.NoneCorrect {
				t.Errorf("broken: cost of pass %v, none correct %v; want null and true", r.CostOfPass, r.NoneCorrect)
			}
		}
	}
}

func TestPlotFrontier(t *testing.T) {
	rep := frontierReport(t)
	dir := t.TempDir()
	for _, name := range []string{"frontier.svg", "frontier.png"} {
		path := filepath.Join(dir, name)
		if err := rep.PlotFrontier(path, "", ""); err != nil {
			t.Fatalf("PlotFrontier %s: %v", name, err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
			t.Fatalf("%s: %v, %v; want a drawn plot", name, fi, err)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, "frontier.svg"))
	if err != nil {
		t.Fatal(err)
	}
	// The coinciding arms share one label; the failed arm is named.
	for _, want := range []string{"router = twin", "not drawn: broken: every item failed", "Pareto frontier", "random mixing weak–strong", "oracle weak/strong"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("frontier.svg does not say %q", want)
		}
	}
	if err := rep.PlotFrontier(filepath.Join(dir, "frontier.gif"), "", ""); err == nil {
		t.Error("PlotFrontier to .gif: no error")
	}
}

func TestCostOfPass(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name      string
		dollars   []float64
		correct   []bool
		want      float64
		wantLo    float64 // NaN: only check lo <= want
		wantHi    float64 // NaN: only check want <= hi
		wantValid bool
	}{
		// $4 over 2 right: $2 per right answer.
		{"half right", []float64{1, 1, 1, 1}, []bool{true, true, false, false}, 2, math.NaN(), math.NaN(), true},
		// Every resample costs $1 a right answer.
		{"all right", []float64{1, 1, 1}, []bool{true, true, true}, 1, 1, 1, true},
		{"none right", []float64{1, 2}, []bool{false, false}, inf, inf, inf, true},
		// (19/20)^20 = 36% of resamples have no right answer: the top is ∞.
		{"rarely right", make([]float64, 20), append([]bool{true}, make([]bool, 19)...), 0, 0, inf, true},
		{"empty", nil, nil, math.NaN(), math.NaN(), math.NaN(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, iv, ok := CostOfPass(tt.dollars, tt.correct, 2000, 1)
			if ok != tt.wantValid {
				t.Fatalf("ok %v, want %v", ok, tt.wantValid)
			}
			if !ok {
				return
			}
			if v != tt.want {
				t.Errorf("cost of pass %v, want %v", v, tt.want)
			}
			if !math.IsNaN(tt.wantLo) && iv.Lo != tt.wantLo || math.IsNaN(tt.wantLo) && !(iv.Lo <= v) {
				t.Errorf("interval %v, want low end %v (or at most %v)", iv, tt.wantLo, v)
			}
			if !math.IsNaN(tt.wantHi) && iv.Hi != tt.wantHi || math.IsNaN(tt.wantHi) && !(iv.Hi >= v) {
				t.Errorf("interval %v, want high end %v (or at least %v)", iv, tt.wantHi, v)
			}
			v2, iv2, _ := CostOfPass(tt.dollars, tt.correct, 2000, 1)
			if v2 != v || iv2 != iv && !(math.IsNaN(iv.Lo) && math.IsNaN(iv2.Lo)) {
				t.Errorf("a second run gave %v %v, want the same %v %v", v2, iv2, v, iv)
			}
		})
	}
}

// TestOracle checks the oracle's pick on each pairing of right and wrong,
// and that it needs paired items.
func TestOracle(t *testing.T) {
	right := func(d float64) itemResult { return itemResult{Correct: true, Dollars: d} }
	wrong := func(d float64) itemResult { return itemResult{Dollars: d} }
	tests := []struct {
		name         string
		strong, weak []itemResult
		want         *FrontierPoint
	}{
		{"both right: the cheaper", []itemResult{right(1)}, []itemResult{right(0.25)}, &FrontierPoint{Name: "oracle", Dollars: 0.25, Accuracy: 1}},
		{"both right, strong cheaper", []itemResult{right(0.5)}, []itemResult{right(2)}, &FrontierPoint{Name: "oracle", Dollars: 0.5, Accuracy: 1}},
		{"both right, a tie: weak", []itemResult{right(1)}, []itemResult{right(1)}, &FrontierPoint{Name: "oracle", Dollars: 1, Accuracy: 1}},
		{"only strong right", []itemResult{right(1)}, []itemResult{wrong(0.25)}, &FrontierPoint{Name: "oracle", Dollars: 1, Accuracy: 1}},
		{"only weak right", []itemResult{wrong(0.25)}, []itemResult{right(1)}, &FrontierPoint{Name: "oracle", Dollars: 1, Accuracy: 1}},
		{"both wrong: the cheaper", []itemResult{wrong(0.5)}, []itemResult{wrong(2)}, &FrontierPoint{Name: "oracle", Dollars: 0.5, Accuracy: 0}},
		{"mean over items", []itemResult{right(1), wrong(1)}, []itemResult{wrong(0), wrong(0)}, &FrontierPoint{Name: "oracle", Dollars: 0.5, Accuracy: 0.5}},
		{"no items", nil, nil, nil},
		{"unpaired", []itemResult{right(1)}, []itemResult{right(1), right(1)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := oracle(tt.strong, tt.weak)
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("oracle = %+v, want %+v", got, tt.want)
			}
		})
	}
}
