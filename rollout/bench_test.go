package rollout

import (
	"context"
	"testing"
)

// BenchmarkRun measures what Run adds around the models, which are instant and scripted.
// Each rollout is a decompose run, a scorer call, an artifact appended and synced, and a state transaction.
func BenchmarkRun(b *testing.B) {
	const items, g = 4, 4
	f := newFixture(b)
	b.ResetTimer()
	for b.Loop() {
		dir := b.TempDir()
		if _, err := Run(context.Background(), config(dir, items, g), tasks(items), f.baseline, Same(f.policy), f.scorer, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*items*g)/b.Elapsed().Seconds(), "rollouts/s")
}
