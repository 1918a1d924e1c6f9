package train

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/delegatelab/delegate"
	"github.com/delegatelab/delegate/bench"
	"github.com/delegatelab/delegate/world"
)

// The handed-calls figure judges the trained solver on the calls it is
// handed in the system as trained. Config.HandedCalls turns it on; off,
// every output is as before.

// LabelQuestions is the record label of the sub-agents' questions, one a
// line in call order. Only runs with Config.HandedCalls record it.
const LabelQuestions = "delegated_questions"

// labelHanded labels a trace as labelDelegated does, and adds the
// questions route's solver was handed (LabelQuestions).
func labelHanded(tr *delegate.Trace) map[string]string {
	m := labelDelegated(tr)
	var qs []string
	for _, n := range tr.Calls() {
		if n.Role == RoleSubagent && len(n.Messages) > 0 {
			q := strings.TrimSpace(n.Messages[len(n.Messages)-1].Content)
			if _, _, _, err := world.ParseExpr(q); err == nil {
				qs = append(qs, q)
			}
		}
	}
	m[LabelQuestions] = strings.Join(qs, "\n")
	return m
}

// evalLabel is the label function of the held-out evaluation.
func (r *runner) evalLabel() func(*delegate.Trace) map[string]string {
	if r.cfg.HandedCalls {
		return labelHanded
	}
	return labelDelegated
}

// handedArm is the arm whose delegator hands the trained solver its
// calls: the trained delegator's with both trained, the frozen one's
// with the solver alone.
func handedArm(train string, steps int) string {
	if train == TrainBoth {
		return trainedName(ArmTrainedBoth, steps)
	}
	return trainedName(ArmTrainedSolver, steps)
}

// HandedQuestions are the questions arm's delegator handed the solver,
// item by item in tasks' order, read from records' LabelQuestions. The
// last record of each item counts. An item without a record, or one
// recorded without the label, is an error naming it.
func HandedQuestions(records []bench.Record, arm string, tasks []delegate.Task) ([]string, error) {
	last := make(map[string]*bench.Record)
	for i := range records {
		if records[i].Arm == arm {
			last[records[i].TaskID] = &records[i]
		}
	}
	var qs []string
	for _, t := range tasks {
		rec, ok := last[t.ID]
		if !ok {
			return nil, fmt.Errorf("arm %q has no result for item %s", arm, t.ID)
		}
		label, ok := rec.Labels[LabelQuestions]
		if !ok {
			return nil, fmt.Errorf("arm %q item %s: recorded without its questions (label %s)", arm, t.ID, LabelQuestions)
		}
		if label != "" {
			qs = append(qs, strings.Split(label, "\n")...)
		}
	}
	return qs, nil
}

// handedReport asks the pretrained and the trained solver the calls the
// handed arm's delegator made on the held-out items, paired. It fills
// rep's Handed fields.
func (r *runner) handedReport(ctx context.Context, rep *RoleReport, steps int) error {
	arm := handedArm(r.cfg.Train, steps)
	records, _, err := bench.ReadResults(filepath.Join(r.cfg.OutDir, EvalFile))
	if err != nil {
		return fmt.Errorf("train: handed calls: %w", err)
	}
	qs, err := HandedQuestions(records, arm, tasksOf(r.testSet))
	if err != nil {
		return fmt.Errorf("train: handed calls: %w", err)
	}
	calls, err := r.solverCalls(ctx, qs)
	if err != nil {
		return err
	}
	rep.HandedArm, rep.HandedCalls = arm, calls
	rep.Handed = SolverTests(rep.HandedCalls, rep.Samples)
	return nil
}

// handedCalls is the solver's test over all its handed calls, the last
// of Handed; nil without the figure.
func (rep *RoleReport) handedCalls() *SolverTest {
	if rep == nil || len(rep.Handed) == 0 {
		return nil
	}
	return &rep.Handed[len(rep.Handed)-1]
}

// handedCheck is the check of the solver's sampled answers on its handed
// calls, after against before. There is none without the figure or
// without samples.
func (rep *RoleReport) handedCheck() []Check {
	h := rep.handedCalls()
	if h == nil || rep.Samples == 0 {
		return nil
	}
	return []Check{{
		Name: fmt.Sprintf("RL-trained solver's own reward on the calls it is handed (the delegator of the system as trained, on held-out items) beats the pretrained solver's (%d samples a call at temperature %g; paired bootstrap 95%% interval of the difference above 0)", rep.Samples, rep.Temperature),
		Pass: h.SampledCI.Lo > 0,
		Detail: fmt.Sprintf("right %.3f against %.3f of the samples: difference %+.3f, 95%% [%+.3f, %+.3f] over %d calls of %s",
			h.SampledAfter, h.SampledBefore, h.SampledDiff, h.SampledCI.Lo, h.SampledCI.Hi, h.N, rep.HandedArm),
	}}
}

// writeHanded writes the handed-calls figure under the solver's table.
func (rep *RoleReport) writeHanded(b *strings.Builder) {
	if len(rep.Handed) == 0 {
		return
	}
	fmt.Fprintf(b, "\n- solver on the calls it is handed: those %s made on the held-out items (%d), asked alike of the pretrained and the RL-trained solver:\n\n", rep.HandedArm, len(rep.HandedCalls))
	rep.writeSolverTests(b, "handed calls", rep.Handed)
}

// writeHanded writes the seeds' handed-calls table and how many seeds
// rise.
func (s *SeedRoles) writeHanded(b *strings.Builder) {
	v := s.Handed
	if v == nil {
		return
	}
	b.WriteString("\nSolver on the calls it is handed (the delegator of the system as trained, on the held-out items; asked alike before and after):\n\n")
	s.writeSolver(b, v, func(r RoleSeedRow) *SolverTest { return r.Handed }, " on its handed calls")
}
