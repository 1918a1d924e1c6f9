package train

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/world"
)

// DelegatorTokens is the delegator's generated tokens per rollout in a
// step's metrics (the policy's, where the step does not say).
func DelegatorTokens(m *rl.Metrics) float64 {
	if v, ok := m.Scalars["delegator_tokens"]; ok {
		return v
	}
	return m.PolicyTokensMean
}

// trainPlots are the plots of a run's metrics: file name, y label, value.
// The name has no extension, as each is written as PNG and SVG.
var trainPlots = []struct {
	file, label string
	value       func(*rl.Metrics) float64
}{
	{"reward", "mean reward", func(m *rl.Metrics) float64 { return m.Reward }},
	{"accuracy", "accuracy", func(m *rl.Metrics) float64 { return m.Accuracy }},
	{"delegator_tokens", "delegator tokens per rollout", DelegatorTokens},
	{"delegation_rate", "delegation rate", func(m *rl.Metrics) float64 { return m.DelegationRate }},
}

// smoothWindow is the number of steps the plots' moving mean spans.
const smoothWindow = 20

// movingMean returns, at each point, the mean of the last window points up
// to it. There are fewer at the start.
func movingMean(xys plotter.XYs, window int) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	var sum float64
	for i, p := range xys {
		sum += p.Y
		if i >= window {
			sum -= xys[i-window].Y
		}
		out[i] = plotter.XY{X: p.X, Y: sum / float64(min(i+1, window))}
	}
	return out
}

// WritePlots plots the metrics log in dir (rl.MetricsFile) over the RL steps.
// It writes each plot as PNG and SVG in dir: reward, accuracy, delegator
// tokens, delegation rate, and that rate per kind of step. It returns the
// files written; none when there is no log.
func WritePlots(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, rl.MetricsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("train: plots: %w", err)
	}
	ms, err := rl.ReadMetrics(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("train: plots: %w", err)
	}
	if len(ms) == 0 {
		return nil, nil
	}
	var files []string
	for _, tp := range trainPlots {
		p, _ := bench.NewPlot(tp.label+" over RL steps", "step", tp.label)
		var xys plotter.XYs
		for i := range ms {
			if v := tp.value(&ms[i]); !math.IsNaN(v) && !math.IsInf(v, 0) {
				xys = append(xys, plotter.XY{X: float64(ms[i].Step), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return files, fmt.Errorf("train: plot %s: %w", tp.file, err)
		}
		points.Radius = vg.Points(2)
		line.Color = color.Gray{Y: 150}
		points.Color = color.Gray{Y: 150}
		p.Add(line, points)
		p.Legend.Add("per step", line, points)
		if len(xys) >= 2*smoothWindow {
			avg, err := plotter.NewLine(movingMean(xys, smoothWindow))
			if err != nil {
				return files, fmt.Errorf("train: plot %s: %w", tp.file, err)
			}
			avg.Width = vg.Points(2)
			avg.Color = color.RGBA{R: 200, A: 255}
			p.Add(avg)
			p.Legend.Add(fmt.Sprintf("mean of the last %d steps", smoothWindow), avg)
		}
		base := filepath.Join(dir, tp.file)
		paths := []string{base + ".png", base + ".svg"}
		if err := bench.SavePlot(p, 6*vg.Inch, 3.8*vg.Inch, bench.LegendBelow, paths...); err != nil {
			return files, fmt.Errorf("train: %w", err)
		}
		files = append(files, paths...)
	}
	kinds, err := writeKindPlot(dir, ms)
	return append(files, kinds...), err
}

// writeKindPlot draws the delegation rate per kind of step over training.
// It shows what the policy learned to hand over. The rate is the moving
// mean of its numerator over that of its denominator.
func writeKindPlot(dir string, ms []rl.Metrics) ([]string, error) {
	p, _ := bench.NewPlot("delegation rate per kind of step over RL steps", "step", "share of the steps delegated")
	p.Y.Min, p.Y.Max = 0, 1
	kinds := []struct {
		op  world.Op
		col color.Color
	}{{world.Mul, color.RGBA{R: 200, A: 255}}, {world.Add, color.RGBA{B: 200, A: 255}}, {world.Sub, color.RGBA{G: 150, A: 255}}}
	drawn := 0
	for _, k := range kinds {
		var xys plotter.XYs
		var num, den float64
		for i := range ms {
			num += ms[i].Scalars[DelegatedMetric(k.op)]
			den += ms[i].Scalars[StepsMetric(k.op)]
			if i >= smoothWindow {
				num -= ms[i-smoothWindow].Scalars[DelegatedMetric(k.op)]
				den -= ms[i-smoothWindow].Scalars[StepsMetric(k.op)]
			}
			if den > 1e-9 {
				xys = append(xys, plotter.XY{X: float64(ms[i].Step), Y: num / den})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("train: plot delegation by kind: %w", err)
		}
		line.Width, line.Color = vg.Points(2), k.col
		p.Add(line)
		p.Legend.Add(map[world.Op]string{world.Mul: "products", world.Add: "sums", world.Sub: "differences"}[k.op], line)
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	p.Legend.Add(fmt.Sprintf("(rates over the last %d steps)", smoothWindow))
	base := filepath.Join(dir, "delegation_by_kind")
	paths := []string{base + ".png", base + ".svg"}
	if err := bench.SavePlot(p, 6*vg.Inch, 3.8*vg.Inch, bench.LegendBelow, paths...); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return paths, nil
}
