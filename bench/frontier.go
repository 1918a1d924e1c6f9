package bench

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// itemResult is what the frontier needs of one item of one arm.
type itemResult struct {
	Correct bool
	Dollars float64
}

func itemResults(recs []*Record) []itemResult {
	out := make([]itemResult, len(recs))
	for i, r := range recs {
		out[i] = itemResult{Correct: r.Correct, Dollars: r.Total.Cost}
	}
	return out
}

// FrontierPoint is one point of the accuracy–cost plane.
type FrontierPoint struct {
	Name     string  `json:"name"`
	Dollars  float64 `json:"dollars"`  // mean per item
	Accuracy float64 `json:"accuracy"` // correct / n
	// Pareto reports that no other arm is as cheap and as accurate, and
	// strictly better in one of the two.
	Pareto bool `json:"pareto,omitempty"`
}

// Frontier is what the frontier plot draws: every arm that ran and their Pareto frontier.
// Given a strong and a weak arm, it adds the oracle and the line of random mixing between them.
type Frontier struct {
	Tasks int             `json:"tasks"`
	Arms  []FrontierPoint `json:"arms"`
	// LeftOut names the arms not drawn and why ("arm: every item failed").
	LeftOut []string `json:"left_out,omitempty"`
	// Pareto holds the arms on the frontier, by dollars then accuracy.
	Pareto []FrontierPoint `json:"pareto"`
	Strong string          `json:"strong,omitempty"`
	Weak   string          `json:"weak,omitempty"`
	// Oracle routes each item to the cheaper of strong and weak that is right.
	// When neither is right, it takes the cheaper of the two.
	Oracle *FrontierPoint `json:"oracle,omitempty"`
	// Mix is the line of random mixing between weak, Mix[0], and strong, Mix[1].
	// Sending a random share p of the items to strong and the rest to weak
	// gives, in expectation, the point p of the way along it.
	Mix []FrontierPoint `json:"mix,omitempty"`
}

// Frontier computes the frontier's data. strong and weak name the arms the
// oracle and the mixing line are drawn between; "" takes the arms marked
// RoleStrong and RoleWeak. Without both, or when either failed, there is
// no oracle and no mixing line. An arm fails when it has no item or every
// item ended in an error: it is left out, never drawn at 0%, $0.
// The table's oracle router row, the weak arm where it is right, is not an arm and is left out too.
func (rep *Report) Frontier(strong, weak string) (*Frontier, error) {
	if strong == "" && weak == "" {
		strong, weak = rep.Strong, rep.Weak
	}
	f := &Frontier{Tasks: rep.Tasks, Pareto: []FrontierPoint{}}
	known, failed := f.addArms(rep.Rows)
	for _, name := range []string{strong, weak} {
		if name != "" && !known[name] {
			return nil, fmt.Errorf("frontier: no arm %q", name)
		}
	}
	if strong != "" && strong == weak {
		return nil, fmt.Errorf("frontier: arm %q is both strong and weak", strong)
	}
	f.markPareto()
	if strong == "" || weak == "" || failed[strong] || failed[weak] {
		return f, nil
	}
	f.addMix(strong, weak)
	f.Oracle = oracle(rep.items[strong], rep.items[weak])
	return f, nil
}

// addArms adds the arms of rows that can be drawn and names the others in
// LeftOut. It returns every arm's name and those that failed.
func (f *Frontier) addArms(rows []Row) (known, failed map[string]bool) {
	known, failed = map[string]bool{}, map[string]bool{}
	for i := range rows {
		r := &rows[i]
		if r.Oracle {
			continue
		}
		known[r.Arm] = true
		if r.N == 0 || r.Errors == r.N || !defined(r.Accuracy) || !defined(r.Dollars) {
			failed[r.Arm] = true
			why := "every item failed"
			if r.N == 0 {
				why = "no item"
			}
			f.LeftOut = append(f.LeftOut, r.Arm+": "+why)
			continue
		}
		f.Arms = append(f.Arms, FrontierPoint{Name: r.Arm, Dollars: r.Dollars, Accuracy: r.Accuracy})
	}
	return known, failed
}

// markPareto marks the arms that no other arm dominates and lists them in
// Pareto, by dollars then accuracy.
func (f *Frontier) markPareto() {
	for i := range f.Arms {
		p := &f.Arms[i]
		p.Pareto = true
		for _, q := range f.Arms {
			if q.Dollars <= p.Dollars && q.Accuracy >= p.Accuracy && (q.Dollars < p.Dollars || q.Accuracy > p.Accuracy) {
				p.Pareto = false
				break
			}
		}
		if p.Pareto {
			f.Pareto = append(f.Pareto, *p)
		}
	}
	sort.SliceStable(f.Pareto, func(i, j int) bool {
		a, b := f.Pareto[i], f.Pareto[j]
		return a.Dollars < b.Dollars || a.Dollars == b.Dollars && a.Accuracy < b.Accuracy
	})
}

// addMix sets Strong and Weak and the mixing line from weak to strong.
func (f *Frontier) addMix(strong, weak string) {
	f.Strong, f.Weak = strong, weak
	var s, w FrontierPoint
	for _, p := range f.Arms {
		switch p.Name {
		case strong:
			s = p
		case weak:
			w = p
		}
	}
	s.Pareto, w.Pareto = false, false
	f.Mix = []FrontierPoint{w, s}
}

// oracle is the point of routing each item to the cheaper arm that is
// right. When neither strong nor weak is right, it takes the cheaper of
// the two. It is nil without paired items: a report built without
// Summarize has none.
func oracle(strong, weak []itemResult) *FrontierPoint {
	if len(strong) == 0 || len(strong) != len(weak) {
		return nil
	}
	var dollars float64
	right := 0
	for i := range strong {
		pick := strong[i]
		switch {
		case strong[i].Correct == weak[i].Correct:
			if weak[i].Dollars <= strong[i].Dollars {
				pick = weak[i]
			}
		case weak[i].Correct:
			pick = weak[i]
		}
		dollars += pick.Dollars
		if pick.Correct {
			right++
		}
	}
	n := float64(len(strong))
	return &FrontierPoint{Name: "oracle", Dollars: dollars / n, Accuracy: float64(right) / n}
}

// MixAt is the mixing line at p: the expected point of sending a share p of the items to strong.
// It is NaN without a mixing line.
func (f *Frontier) MixAt(p float64) (dollars, accuracy float64) {
	if len(f.Mix) != 2 {
		return math.NaN(), math.NaN()
	}
	w, s := f.Mix[0], f.Mix[1]
	return w.Dollars + p*(s.Dollars-w.Dollars), w.Accuracy + p*(s.Accuracy-w.Accuracy)
}

// PlotFrontier draws accuracy against dollars per item with the Pareto frontier and writes it to path.
// The extension of path picks PNG or SVG.
// Every arm is a labelled point; arms whose points coincide share one label.
// Given a strong and a weak arm, it draws the oracle and the dashed line of random mixing.
// A router must beat that line to be worth its keep.
// Arms left out are named in the legend.
func (rep *Report) PlotFrontier(path, strong, weak string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	f, err := rep.Frontier(strong, weak)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	p, _ := NewPlot(fmt.Sprintf("Accuracy against cost, Pareto frontier (n = %d tasks)", rep.Tasks), "dollars per item", "accuracy, %")
	if err := drawFrontierLines(p, f); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	maxX, err := drawFrontierPoints(p, f, path)
	if err != nil {
		return err
	}
	for _, why := range f.LeftOut {
		p.Legend.Add("not drawn: " + why)
	}
	if len(f.Arms) == 0 {
		p.Legend.Add("no arm to draw")
	}
	accuracyCostAxes(p, maxX, 1.25)
	return SavePlot(p, 7.5*vg.Inch, 4.5*vg.Inch, LegendRight, path)
}

// drawFrontierLines draws the Pareto frontier, when it joins two arms or
// more, and the dashed line of random mixing.
func drawFrontierLines(p *plot.Plot, f *Frontier) error {
	if len(f.Pareto) > 1 {
		line, err := plotter.NewLine(frontierXYs(f.Pareto))
		if err != nil {
			return err
		}
		line.LineStyle.Width = vg.Points(1.5)
		line.LineStyle.Color = color.Gray{Y: 0x30}
		p.Add(line)
		p.Legend.Add("Pareto frontier", line)
	}
	if len(f.Mix) == 2 {
		line, err := plotter.NewLine(frontierXYs(f.Mix))
		if err != nil {
			return err
		}
		line.LineStyle.Width = vg.Points(1.2)
		line.LineStyle.Color = color.Gray{Y: 0x80}
		line.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("random mixing %s–%s", f.Weak, f.Strong), line)
	}
	return nil
}

// drawFrontierPoints draws every arm, the oracle and the arms' labels. It
// returns the largest dollars drawn. Its errors name path.
func drawFrontierPoints(p *plot.Plot, f *Frontier, path string) (maxX float64, err error) {
	for i, a := range f.Arms {
		sc, err := plotter.NewScatter(frontierXYs([]FrontierPoint{a}))
		if err != nil {
			return 0, fmt.Errorf("plot %s arm %q: %w", path, a.Name, err)
		}
		sc.GlyphStyle.Color = plotutil.Color(i)
		sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = vg.Points(4.5), costGlyphs[i%len(costGlyphs)]
		p.Add(sc)
		name := a.Name
		if a.Pareto {
			name += " (frontier)"
		}
		p.Legend.Add(name, sc)
		maxX = math.Max(maxX, a.Dollars)
	}
	if o := f.Oracle; o != nil {
		sc, err := plotter.NewScatter(frontierXYs([]FrontierPoint{*o}))
		if err != nil {
			return 0, fmt.Errorf("plot %s: oracle: %w", path, err)
		}
		sc.GlyphStyle.Color = color.Gray{Y: 0x40}
		sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = vg.Points(5), draw.RingGlyph{}
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("oracle %s/%s: the cheaper right one", f.Weak, f.Strong), sc)
		maxX = math.Max(maxX, o.Dollars)
	}
	if labels := frontierLabels(f.Arms); len(labels.Labels) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return 0, fmt.Errorf("plot %s: %w", path, err)
		}
		l.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(4)}
		p.Add(l)
	}
	return maxX, nil
}

func frontierXYs(ps []FrontierPoint) plotter.XYs {
	xys := make(plotter.XYs, len(ps))
	for i, p := range ps {
		xys[i] = plotter.XY{X: p.Dollars, Y: 100 * p.Accuracy}
	}
	return xys
}

// frontierLabels names each point once.
// Arms whose points coincide share one label listing them all, so none is hidden.
func frontierLabels(arms []FrontierPoint) plotter.XYLabels {
	var out plotter.XYLabels
	at := map[[2]float64]int{}
	for _, a := range arms {
		key := [2]float64{a.Dollars, a.Accuracy}
		if i, ok := at[key]; ok {
			out.Labels[i] += " = " + a.Name
			continue
		}
		at[key] = len(out.Labels)
		out.XYs = append(out.XYs, plotter.XY{X: a.Dollars, Y: 100 * a.Accuracy})
		out.Labels = append(out.Labels, a.Name)
	}
	return out
}
