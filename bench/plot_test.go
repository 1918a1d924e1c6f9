package bench

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// diagonalPlot is a plot whose one line runs corner to corner of the data area.
// The line's extent is then the data area.
func diagonalPlot(t *testing.T) *plot.Plot {
	t.Helper()
	p := plot.New()
	p.Title.Text = "a title"
	p.X.Label.Text, p.Y.Label.Text = "x", "y"
	line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 10, Y: 10}})
	if err != nil {
		t.Fatal(err)
	}
	p.Add(line)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 10, 0, 10
	p.Legend.Add("per step", line)
	p.Legend.Add("mean of the last 20 steps", line)
	p.Legend.Top = true // where the train plots had it: over the line's end
	return p
}

// The legend lies outside the data area, wherever the data are.
func TestSavePlotLegendHidesNoData(t *testing.T) {
	for _, place := range []LegendPlace{LegendBelow, LegendRight} {
		p := diagonalPlot(t)
		var rec recorder.Canvas
		drawOutsideLegend(p, draw.NewCanvas(&rec, 6*vg.Inch, 3.8*vg.Inch), place)
		data := vg.Rectangle{Min: vg.Point{X: vg.Length(math.Inf(1)), Y: vg.Length(math.Inf(1))}, Max: vg.Point{X: vg.Length(math.Inf(-1)), Y: vg.Length(math.Inf(-1))}}
		texts := map[string]vg.Point{}
		for _, a := range rec.Actions {
			switch a := a.(type) {
			case *recorder.Stroke:
				// The diagonal is the only two-point path going up and right.
				var pts []vg.Point
				for _, c := range a.Path {
					pts = append(pts, c.Pos)
				}
				if len(pts) == 2 && pts[1].X > pts[0].X && pts[1].Y > pts[0].Y {
					data = vg.Rectangle{Min: pts[0], Max: pts[1]}
				}
			case *recorder.FillString:
				texts[a.String] = a.Point
			}
		}
		if math.IsInf(float64(data.Min.X), 0) {
			t.Fatalf("place %d: the data line was not drawn", place)
		}
		for _, entry := range []string{"per step", "mean of the last 20 steps"} {
			pt, ok := texts[entry]
			if !ok {
				t.Fatalf("place %d: legend entry %q not drawn", place, entry)
			}
			height := p.Legend.TextStyle.Rectangle(entry).Size().Y
			switch place {
			case LegendBelow:
				if pt.Y+height > data.Min.Y {
					t.Errorf("below: entry %q at y %v..%v reaches the data area, which starts at y %v", entry, pt.Y, pt.Y+height, data.Min.Y)
				}
			case LegendRight:
				if pt.X < data.Max.X {
					t.Errorf("right: entry %q at x %v lies inside the data area, which ends at x %v", entry, pt.X, data.Max.X)
				}
			}
		}
		if !p.Legend.Top {
			t.Errorf("place %d: SavePlot changed the plot's legend", place)
		}
	}
}

func TestSavePlotWritesPNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	png, svg := filepath.Join(dir, "p.png"), filepath.Join(dir, "p.svg")
	if err := SavePlot(diagonalPlot(t), 4*vg.Inch, 3*vg.Inch, LegendBelow, png, svg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(png)
	if err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("p.png is not a PNG (%v)", err)
	}
	b, err = os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "per step") {
		t.Errorf("p.svg is not an SVG with the legend (%v)", err)
	}
	if err := SavePlot(diagonalPlot(t), 4*vg.Inch, 3*vg.Inch, LegendBelow, filepath.Join(dir, "p.gif")); err == nil || !strings.Contains(err.Error(), `unknown format ".gif"`) {
		t.Errorf("SavePlot to .gif: %v", err)
	}
}

// An arm whose every item failed, or that has none, is not drawn at 0%, $0.
// The plot draws exactly what it draws without it, and the legend says why it is missing.
func TestPlotCostLeavesOutFailedArms(t *testing.T) {
	ok := Row{Arm: "a", Strategy: "single", N: 10, Correct: 5, Accuracy: 0.5, CI: Interval{Lo: 0.24, Hi: 0.76}, Dollars: 0.01}
	failed := Row{Arm: "b", Strategy: "route", N: 10, Errors: 10, CI: Interval{Lo: 0, Hi: 0.28}}
	empty := Row{Arm: "c", Strategy: "lead", Accuracy: math.NaN(), Dollars: math.NaN(), CI: Interval{Lo: math.NaN(), Hi: math.NaN()}}
	unanswered := Row{Arm: "d", Strategy: "single", N: 10, Failures: 10, CI: Interval{Lo: 0, Hi: 0.28}}
	// Failed answers that cost something are data: drawn.
	misformatted := Row{Arm: "e", Strategy: "single", N: 10, Failures: 10, Dollars: 0.002, CI: Interval{Lo: 0, Hi: 0.28}}
	render := func(rows ...Row) (shapes int, texts []string) {
		t.Helper()
		rep := &Report{Tasks: 10, Rows: rows}
		p, err := rep.costPlot("cost.svg")
		if err != nil {
			t.Fatal(err)
		}
		var rec recorder.Canvas
		drawOutsideLegend(p, draw.NewCanvas(&rec, 7*vg.Inch, 4.5*vg.Inch), LegendRight)
		for _, a := range rec.Actions {
			switch a := a.(type) {
			case *recorder.Stroke, *recorder.Fill:
				shapes++
			case *recorder.FillString:
				texts = append(texts, a.String)
			}
		}
		return shapes, texts
	}
	wantShapes, _ := render(ok, misformatted)
	gotShapes, texts := render(ok, failed, empty, unanswered, misformatted)
	if gotShapes != wantShapes {
		t.Errorf("with arms without data the plot draws %d shapes, want %d: they were drawn", gotShapes, wantShapes)
	}
	for _, want := range []string{"not drawn: b: every item failed", "not drawn: c: no item", "not drawn: d: every item failed, nothing spent", "e"} {
		if !slices.Contains(texts, want) {
			t.Errorf("legend lacks %q; texts: %q", want, texts)
		}
	}
	if slices.Contains(texts, "b") {
		t.Errorf("the failed arm has a legend entry of its own: %q", texts)
	}
	// Failed arms alone: no point, and the legend says why, so that a run
	// that produced nothing still writes its files.
	if _, texts := render(failed, unanswered); !slices.Contains(texts, "not drawn: b: every item failed") {
		t.Errorf("a plot of failed arms alone: legend %q", texts)
	}
	rep := &Report{Tasks: 10}
	if _, err := rep.costPlot("cost.svg"); err == nil {
		t.Error("a plot of no arm at all: no error")
	}
}
