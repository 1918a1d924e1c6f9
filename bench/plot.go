package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotFormats are the file extensions the plots are written in.
var plotFormats = map[string]bool{".png": true, ".svg": true}

func checkPlotPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if !plotFormats[ext] {
		return fmt.Errorf("plot %s: unknown format %q (want .png or .svg)", path, ext)
	}
	return nil
}

// NewPlot returns a plot with its title, axis labels and a grid.
// An empty label means none. Every plot of bench and train starts here.
// The grid is returned for a caller that styles it.
func NewPlot(title, xLabel, yLabel string) (*plot.Plot, *plotter.Grid) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	grid := plotter.NewGrid()
	p.Add(grid)
	return p, grid
}

// PlotCost draws accuracy against dollars per item and writes it to path.
// The extension of path picks PNG or SVG.
// Accuracy is in percent with Wilson 95% error bars.
// There is one marker per arm and one for the oracle router.
// Rows without a defined accuracy or cost are left out; with none left it is an error.
// An arm without data is not drawn at 0%, $0 but named in the legend as not drawn.
func (rep *Report) PlotCost(path string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	p, err := rep.costPlot(path)
	if err != nil {
		return err
	}
	return SavePlot(p, 7*vg.Inch, 4.5*vg.Inch, LegendRight, path)
}

// noData says why a row has no point to draw, or "" when it has one.
// The reasons are no item, every item an error,
// or every item failed before any answer with nothing spent.
// The oracle router always has a point.
func (r *Row) noData() string {
	switch {
	case r.Oracle:
		return ""
	case r.N == 0:
		return "no item"
	case r.Errors == r.N:
		return "every item failed"
	case r.Failures+r.Errors >= r.N && r.Correct == 0 && r.Dollars == 0:
		return "every item failed, nothing spent"
	}
	return ""
}

// costPlot builds PlotCost's plot; path only names it in errors.
func (rep *Report) costPlot(path string) (*plot.Plot, error) {
	p, _ := NewPlot(fmt.Sprintf("Accuracy against cost (n = %d tasks)", rep.Tasks), "dollars per item", "accuracy, % (95% Wilson interval)")
	drawn := 0
	maxX := 0.0
	var leftOut []string
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if why := r.noData(); why != "" {
			leftOut = append(leftOut, r.armCell()+": "+why)
			continue
		}
		if !defined(r.Accuracy) || !defined(r.Dollars) {
			continue
		}
		sc, eb, err := errorMarker(path, r.Arm, r.Dollars, 100*r.Accuracy, 100*(r.Accuracy-r.CI.Lo), 100*(r.CI.Hi-r.Accuracy), i)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = vg.Points(4.5), costGlyphs[i%len(costGlyphs)]
		eb.CapWidth = vg.Points(8)
		if r.Oracle {
			// Not a real arm: an upper bound computed from two others.
			gray := color.Gray{Y: 0x40}
			sc.GlyphStyle.Shape = draw.RingGlyph{}
			sc.GlyphStyle.Color, eb.LineStyle.Color = gray, gray
			eb.LineStyle.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		}
		p.Add(eb, sc)
		p.Legend.Add(r.armCell(), sc)
		drawn++
		maxX = math.Max(maxX, r.Dollars)
	}
	if drawn == 0 && (len(leftOut) == 0 || rep.Tasks == 0) {
		return nil, fmt.Errorf("plot %s: no arm has a defined accuracy and cost", path)
	}
	// With items run but every arm left out the plot is empty but for the
	// legend, which says why: a run that produced nothing still gets its
	// files.
	for _, why := range leftOut {
		p.Legend.Add("not drawn: " + why)
	}
	accuracyCostAxes(p, maxX, 1.15)
	return p, nil
}

// accuracyCostAxes sets the axes of an accuracy-against-dollars plot. The
// dollar axis runs from 0 to maxX times headroom; accuracy from 0 to 105%.
func accuracyCostAxes(p *plot.Plot, maxX, headroom float64) {
	p.X.Min = 0
	if maxX > 0 {
		p.X.Max = maxX * headroom
	} else {
		p.X.Max = 1e-6 // every arm is free: keep the axis readable
	}
	p.Y.Min, p.Y.Max = 0, 105
	p.Y.Tick.Marker = percentTicks
	p.Legend.ThumbnailWidth = vg.Points(14)
}

// costGlyphs tell the arms apart by shape as well as colour: the filled
// shapes first.
var costGlyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}}

// percentTicks labels 0, 20, ..., 100 with minor ticks every 10.
var percentTicks = func() plot.ConstantTicks {
	var ts plot.ConstantTicks
	for v := 0; v <= 100; v += 10 {
		label := ""
		if v%20 == 0 {
			label = strconv.Itoa(v)
		}
		ts = append(ts, plot.Tick{Value: float64(v), Label: label})
	}
	return ts
}()

// PlotLatency draws each arm's median latency per item, with a whisker up to its 95th percentile.
// It writes the plot to path, as PNG or SVG by its extension.
// The oracle router is left out: it has no latency of its own.
func (rep *Report) PlotLatency(path string) error {
	if err := checkPlotPath(path); err != nil {
		return err
	}
	p, grid := NewPlot(fmt.Sprintf("Latency per item (n = %d tasks): median, whisker to p95", rep.Tasks), "", "")
	grid.Vertical.Color = nil // the arms are names, not a scale
	// Seconds, or milliseconds when every p95 is under a second.
	scale, unit := 1.0, "seconds"
	maxP95 := 0.0
	for i := range rep.Rows {
		if r := &rep.Rows[i]; !r.Oracle && defined(r.LatencyP95) {
			maxP95 = math.Max(maxP95, r.LatencyP95)
		}
	}
	if maxP95 < 1 {
		scale, unit = 1000, "milliseconds"
	}
	p.Y.Label.Text = unit
	var names []string
	maxY := 0.0
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Oracle {
			continue
		}
		x := float64(len(names))
		names = append(names, r.Arm)
		if !defined(r.LatencyP50) || !defined(r.LatencyP95) {
			continue
		}
		sc, eb, err := errorMarker(path, r.Arm, x, scale*r.LatencyP50, 0, scale*(r.LatencyP95-r.LatencyP50), i)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = vg.Points(4), draw.BoxGlyph{}
		eb.CapWidth = vg.Points(10)
		p.Add(eb, sc)
		maxY = math.Max(maxY, scale*r.LatencyP95)
	}
	if len(names) == 0 {
		return errors.New("plot " + path + ": no arm to draw")
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.Y.Min = 0
	if maxY > 0 {
		p.Y.Max = maxY * 1.1
	} else {
		p.Y.Max = 1
	}
	w := vg.Length(math.Max(5, 1.3*float64(len(names)))) * vg.Inch
	return SavePlot(p, w, 4*vg.Inch, LegendRight, path)
}

// errorMarker is arm i's marker at x, y with its error bar from y-low to y+high.
// Both take the arm's colour.
// The caller sets the glyph's shape and size and the bar's cap.
func errorMarker(path, arm string, x, y, low, high float64, i int) (*plotter.Scatter, *plotter.YErrorBars, error) {
	pt := struct {
		plotter.XYs
		plotter.YErrors
	}{
		XYs:     plotter.XYs{{X: x, Y: y}},
		YErrors: plotter.YErrors{{Low: low, High: high}},
	}
	sc, err := plotter.NewScatter(pt)
	if err != nil {
		return nil, nil, fmt.Errorf("plot %s arm %q: %w", path, arm, err)
	}
	eb, err := plotter.NewYErrorBars(pt)
	if err != nil {
		return nil, nil, fmt.Errorf("plot %s arm %q: %w", path, arm, err)
	}
	c := plotutil.Color(i)
	sc.GlyphStyle.Color = c
	eb.LineStyle.Color = c
	eb.LineStyle.Width = vg.Points(1.2)
	return sc, eb, nil
}

// LegendPlace is where SavePlot puts a plot's legend.
// The legend takes a strip of its own beside the axes, where it hides no data.
type LegendPlace int

const (
	// LegendRight is a column right of the axes, level with the data's
	// top: for several entries.
	LegendRight LegendPlace = iota
	// LegendBelow is a strip under the axes: for a few long entries on a
	// wide plot.
	LegendBelow
)

// SavePlot draws p at w × h with its legend at place, outside the data area.
// It writes the plot to every path, as PNG or SVG by its extension.
// p's own legend position is ignored; p is left as it was.
func SavePlot(p *plot.Plot, w, h vg.Length, place LegendPlace, paths ...string) error {
	for _, path := range paths {
		if err := checkPlotPath(path); err != nil {
			return err
		}
		format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
		c, err := draw.NewFormattedCanvas(w, h, format)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		drawOutsideLegend(p, draw.New(c), place)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		if _, err := c.WriteTo(f); err != nil {
			f.Close() // the write error is the one to report
			return fmt.Errorf("plot %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
	}
	return nil
}

// legendPad separates the legend from the axes and the canvas's edge.
var legendPad = vg.Points(8)

// drawOutsideLegend draws p on dc with the axes shrunk to leave the legend
// a strip of its own at place.
func drawOutsideLegend(p *plot.Plot, dc draw.Canvas, place LegendPlace) {
	leg := p.Legend
	p.Legend = plot.NewLegend() // no entries: Draw draws none
	defer func() { p.Legend = leg }()
	size := leg.Rectangle(dc).Size()
	if size.X == 0 {
		p.Draw(dc)
		return
	}
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	switch place {
	case LegendBelow:
		strip := size.Y + 2*legendPad
		p.Draw(draw.Crop(dc, 0, 0, strip, 0))
		leg.Draw(draw.Crop(dc, legendPad, -legendPad, legendPad, -(dc.Size().Y - strip + legendPad)))
	default:
		strip := size.X + 2*legendPad
		p.Draw(draw.Crop(dc, 0, -strip, 0, 0))
		top := legendPad
		if p.Title.Text != "" {
			top += p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
		}
		leg.Draw(draw.Crop(dc, dc.Size().X-strip+legendPad, -legendPad, legendPad, -top))
	}
}

// Files names the outputs WriteFiles writes into a directory.
var Files = []string{"table.md", "table.csv", "report.json", "cost.png", "cost.svg", "frontier.png", "frontier.svg", "latency.png", "latency.svg"}

// WriteFiles writes the table and the plots into dir under the names in Files, and returns their paths.
// The table goes out as Markdown, CSV and JSON.
// The cost, frontier and latency plots go out as PNG and SVG.
// dir is created if needed.
func (rep *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write report %s: %w", dir, err)
	}
	var paths []string
	for _, name := range Files {
		path := filepath.Join(dir, name)
		var err error
		switch name {
		case "table.md", "table.csv":
			err = writeFile(path, rep, name == "table.md")
		case "report.json":
			err = writeJSON(path, rep)
		case "cost.png", "cost.svg":
			err = rep.PlotCost(path)
		case "frontier.png", "frontier.svg":
			err = rep.PlotFrontier(path, rep.FrontierStrong, rep.FrontierWeak)
		case "latency.png", "latency.svg":
			err = rep.PlotLatency(path)
		}
		if err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func writeJSON(path string, rep *Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	err = rep.WriteJSON(f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write report %s: %w", path, cerr)
	}
	return err
}

func writeFile(path string, rep *Report, markdown bool) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write report %s: %w", path, err)
	}
	if markdown {
		err = rep.WriteMarkdown(f)
	} else {
		err = rep.WriteCSV(f)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write report %s: %w", path, cerr)
	}
	return err
}
