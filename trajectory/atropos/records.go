package atropos

import (
	"encoding/json"
	"fmt"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/rl"
	"github.com/delegatelab/delegate/rollout"
)

// RecordGroup converts a group record to a trainer's group at step, as
// train --api converts a batch's group: ScoredDataOf, then what Source
// does with each group of a batch. Every sequence is checked against the
// policy's vocabulary and context. The advantages are the record's, or
// est's under credit reward.CreditRole. The staleness is step-1 less the
// record's policy version. The group goes through JSON, as through the
// API. A trainer fed group records in process (the
// gateway's) uses it, so that it trains on them exactly as train --api
// would. An error says why the policy cannot train on the group; sd is
// the group as far as it was made, for a QuarantineRecord.
func RecordGroup(rec *rollout.GroupRecord, step int, est reward.Estimator, credit string, vocab, context int) (g rl.Group, sd ScoredData, err error) {
	sd, err = ScoredDataOf(rec)
	if err != nil {
		return rl.Group{}, sd, err
	}
	// Through JSON, as through the API: the overrides then hold what a
	// batch's decoded group holds (numbers as float64).
	b, err := json.Marshal(sd)
	if err != nil {
		return rl.Group{}, sd, fmt.Errorf("group %s: encode: %w", rec.ID, err)
	}
	var decoded ScoredData
	if err := json.Unmarshal(b, &decoded); err != nil {
		return rl.Group{}, sd, fmt.Errorf("group %s: decode: %w", rec.ID, err)
	}
	sd = decoded
	for i, toks := range sd.Tokens {
		if err := usable(i, toks, vocab, context); err != nil {
			return rl.Group{}, sd, fmt.Errorf("group %s: %w", rec.ID, err)
		}
	}
	if g, err = groupOf(sd, est, credit); err != nil {
		return rl.Group{}, sd, fmt.Errorf("group %s: %w", rec.ID, err)
	}
	// The parameters before this step are version step-1.
	g.Staleness = -1
	if v := ReadGroupOverride(sd.GroupOverrides).PolicyVersion; v != nil {
		g.Staleness = max(step-1-*v, 0)
	}
	return g, sd, nil
}

// AppendQuarantine appends rec as one line to the quarantine log at path,
// as Source does for a group of a batch.
func AppendQuarantine(path string, rec QuarantineRecord) error {
	rec.Version = QuarantineVersion
	return appendJSONL(path, rec)
}
