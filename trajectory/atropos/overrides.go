package atropos

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/delegatelab/delegate"
)

// The keys of group_overrides and of a sequence's overrides that delegate
// writes and reads. This file is the only place that spells them.
const (
	keyGroupID            = "group_id"
	keyGroupSize          = "group_size"
	keyPolicyVersion      = "policy_version"
	keyBatchOrder         = "batch_order"
	keyRoles              = "roles"
	keySetAdvantageToZero = "set_advantage_to_zero"
)

// Per-sequence overrides that delegate's environments send beside Atropos's
// set_advantage_to_zero. They say what the sequence's rollout was scored
// from. Delegate's trainer reports them in its metrics: accuracy, delegation
// rate, the means of the numbers. Atropos keeps a sequence's overrides as a
// free-form object, so other trainers pass them by.
const (
	OverrideCorrect   = "correct"          // bool: the answer was right; absent: not known
	OverrideDelegated = "delegated"        // bool: the rollout called a sub-agent
	OverrideCalls     = "subagent_calls"   // number: its sub-agent calls
	OverrideTokens    = "delegator_tokens" // number: the policy's generated tokens
	OverrideCost      = "cost"             // number: its cost in dollars, every role's calls
)

// Per-sequence overrides that say which sample of its episode a sequence
// is, for credit per role (reward.RoleCredit). They give its role, its
// question and its own verifiable result where one exists. A role's
// samples given the same question are compared.
const (
	OverrideRole          = "role"           // string: the role whose call the sequence is
	OverrideQuestion      = "question"       // string: the last message its first call was given
	OverrideSampleCorrect = "sample_correct" // bool: its own answer was right; absent: only the task judges it
)

// GroupOverride is what delegate reads and writes in a group's
// group_overrides. A nil pointer or empty value is a key left out.
type GroupOverride struct {
	// GroupID is the group's identity for the API's deduplication.
	GroupID string
	// GroupSize is the group's size; 0 leaves it out.
	GroupSize int
	// PolicyVersion is the trainer step the rollouts were sampled with.
	PolicyVersion *int
	// BatchOrder is the group's item's place among its step's items. The
	// trainer uses it to order a batch as the in-process loop does.
	BatchOrder *int
	// Roles says what played each role.
	Roles []delegate.RolePolicy
}

// Map is o as the free-form object ScoredData.GroupOverrides holds.
func (o GroupOverride) Map() map[string]any {
	m := map[string]any{}
	if o.GroupID != "" {
		m[keyGroupID] = o.GroupID
	}
	if o.GroupSize > 0 {
		m[keyGroupSize] = o.GroupSize
	}
	if o.PolicyVersion != nil {
		m[keyPolicyVersion] = *o.PolicyVersion
	}
	if o.BatchOrder != nil {
		m[keyBatchOrder] = *o.BatchOrder
	}
	if len(o.Roles) > 0 {
		m[keyRoles] = o.Roles
	}
	return m
}

// ReadGroupOverride reads what a trainer uses of a decoded group_overrides.
// That is the policy version, a whole number not negative, and the batch
// order, a whole number. A value of the wrong type is left out; roles and the
// group's id and size are the API's business and are not read.
func ReadGroupOverride(m map[string]any) GroupOverride {
	var o GroupOverride
	if v, ok := wholeNumber(m[keyPolicyVersion]); ok && v >= 0 {
		o.PolicyVersion = &v
	}
	if v, ok := wholeNumber(m[keyBatchOrder]); ok {
		o.BatchOrder = &v
	}
	return o
}

// wholeNumber is v as an int when it is a JSON number without a fraction.
func wholeNumber(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int(f), true
}

// parseGroupOverride checks a pushed group's group_overrides as the API
// stores it: policy_version an integer, roles a list of roles. It returns
// the policy version and the group id the API keys groups by. loc is
// where group_overrides is in the request, for errors.
func parseGroupOverride(over map[string]json.RawMessage, loc []any) (GroupOverride, *fieldError) {
	at := func(key string) []any { return append(append([]any{}, loc...), key) }
	var o GroupOverride
	if p, ok := over[keyPolicyVersion]; ok && !isNull(p) {
		pv, err := strconv.ParseInt(string(p), 10, 64)
		if err != nil {
			return o, &fieldError{loc: at(keyPolicyVersion), msg: "Input should be a valid integer (the trainer step the rollouts were sampled with)"}
		}
		v := int(pv)
		o.PolicyVersion = &v
	}
	if r, ok := over[keyRoles]; ok && !isNull(r) {
		roles, err := GroupRoles(r)
		if err != nil {
			return o, &fieldError{loc: at(keyRoles), msg: "Input should be a valid list of roles: " + err.Error()}
		}
		o.Roles = roles
	}
	if id, ok := over[keyGroupID]; ok && !isNull(id) {
		var str string
		if json.Unmarshal(id, &str) != nil {
			str = string(id) // a number or other JSON value: its text
		}
		o.GroupID = str
	}
	return o, nil
}

// SequenceOverride is what delegate reads and writes in one sequence's
// overrides. It holds Atropos's set_advantage_to_zero and, under the Override
// keys, what the sequence's rollout was scored from. A nil pointer is a key
// left out.
type SequenceOverride struct {
	SetAdvantageToZero bool
	Correct            *bool
	Delegated          *bool
	// Calls, Tokens and Cost are numbers the trainer reports as scalars
	// under OverrideCalls, OverrideTokens and OverrideCost.
	Calls, Tokens, Cost *float64
	// Role and Question say which sample the sequence is; SampleCorrect
	// is its own result. Role "" leaves all three out.
	Role, Question string
	SampleCorrect  *bool
}

// Map is o as the free-form object of ScoredData.Overrides.
func (o SequenceOverride) Map() map[string]any {
	m := map[string]any{keySetAdvantageToZero: o.SetAdvantageToZero}
	if o.Correct != nil {
		m[OverrideCorrect] = *o.Correct
	}
	if o.Delegated != nil {
		m[OverrideDelegated] = *o.Delegated
	}
	for k, v := range o.numbers() {
		if v != nil {
			m[k] = *v
		}
	}
	if o.Role != "" {
		m[OverrideRole], m[OverrideQuestion] = o.Role, o.Question
		if o.SampleCorrect != nil {
			m[OverrideSampleCorrect] = *o.SampleCorrect
		}
	}
	return m
}

// ReadSequenceOverride reads a decoded sequence's overrides. A value of
// the wrong type, or a number that is not finite, is left out.
func ReadSequenceOverride(m map[string]any) SequenceOverride {
	var o SequenceOverride
	o.SetAdvantageToZero, _ = m[keySetAdvantageToZero].(bool)
	if v, ok := m[OverrideCorrect].(bool); ok {
		o.Correct = &v
	}
	if v, ok := m[OverrideDelegated].(bool); ok {
		o.Delegated = &v
	}
	for k, p := range map[string]**float64{OverrideCalls: &o.Calls, OverrideTokens: &o.Tokens, OverrideCost: &o.Cost} {
		if v, ok := m[k].(float64); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			*p = &v
		}
	}
	if r, ok := m[OverrideRole].(string); ok && r != "" {
		o.Role = r
		o.Question, _ = m[OverrideQuestion].(string) // the API checked its type
		if v, ok := m[OverrideSampleCorrect].(bool); ok {
			o.SampleCorrect = &v
		}
	}
	return o
}

// checkSequenceOverride checks the types of the sample keys of one
// sequence's overrides, as the API stores them. loc is where the object
// is in the request, for errors.
func checkSequenceOverride(ov map[string]json.RawMessage, loc []any) *fieldError {
	at := func(key string) []any { return append(append([]any{}, loc...), key) }
	for _, k := range []string{OverrideRole, OverrideQuestion} {
		if v, ok := ov[k]; ok && !isNull(v) {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return &fieldError{loc: at(k), msg: "Input should be a valid string"}
			}
		}
	}
	if v, ok := ov[OverrideSampleCorrect]; ok && !isNull(v) {
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return &fieldError{loc: at(OverrideSampleCorrect), msg: "Input should be a valid boolean"}
		}
	}
	_, q := ov[OverrideQuestion]
	_, c := ov[OverrideSampleCorrect]
	if r, ok := ov[OverrideRole]; (!ok || isNull(r)) && (q || c) {
		return &fieldError{loc: at(OverrideRole), msg: "Field required: question and sample_correct name a sample of a role"}
	}
	return nil
}

// Scalars are o's numbers by their keys, nil when it has none.
func (o SequenceOverride) Scalars() map[string]float64 {
	var s map[string]float64
	for k, v := range o.numbers() {
		if v == nil {
			continue
		}
		if s == nil {
			s = map[string]float64{}
		}
		s[k] = *v
	}
	return s
}

func (o SequenceOverride) numbers() map[string]*float64 {
	return map[string]*float64{OverrideCalls: o.Calls, OverrideTokens: o.Tokens, OverrideCost: o.Cost}
}
