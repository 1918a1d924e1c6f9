package train

import (
	"context"

	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/strategy"
)

// mode is what a training mode gives a run. That is its strategy settings
// and models, its rollout source, its table's arms and notes, and the
// criteria it is judged by. Run calls its methods in the order listed,
// from one goroutine.
type mode interface {
	// startModel is the shipped model the policy starts from when
	// Config.Delegator is "".
	startModel() string
	// settings adjusts the run's strategy config for the mode.
	settings(scfg *strategy.Config)
	// open loads the mode's own models, such as MLPO's peers.
	open() error
	// prepare chooses what the baselines need from training items, such
	// as the best fixed rule.
	prepare(ctx context.Context, phase func(string)) error
	// baselines are the arms that do not depend on training. The last
	// startArms of them run the starting policy in the trained seat.
	baselines() []bench.Arm
	startArms() int
	// trainedArms are the arms of the trained policy after steps steps.
	trainedArms(steps int) []bench.Arm
	// source is where the lead trainer's groups come from.
	source(ctx context.Context, cfg rl.Config) (rl.Source, error)
	// final adds the arms that depend on the trained policy's table to
	// arms and tab, and returns them.
	final(ctx context.Context, phase func(string), arms []bench.Arm, tab *Table, steps int) ([]bench.Arm, *Table, error)
	// notes are the mode's notes under the table, after the common ones.
	notes() []string
	// acceptance decides the trained delegator's criteria on t.
	acceptance(t *Table) []Check
}

// newMode returns the implementation of the mode named name for r. The
// methods startModel and acceptance do not use r, which may be nil.
// Config.Validate rejects any other name; route stands in for it here.
func newMode(name string, r *runner) mode {
	switch name {
	case ModeMLPO:
		return mlpoMode{r}
	case ModeDecompose:
		return decomposeMode{r}
	default:
		return routeMode{r}
	}
}
