package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/delegatelab/delegate/reward"
	"github.com/delegatelab/delegate/world"
)

// RunFile records what a run in OutDir is, so that a later invocation
// resumes only the same run.
const RunFile = "run.json"

// identityVersion is the format version of RunFile.
const identityVersion = 3

// identity is RunFile: the settings a resumed run must share with the run
// it continues. Budgets and evaluation settings may change between
// invocations. A key absent from a run file, written by an earlier
// version or left out when off, takes olderRun's value.
type identity struct {
	Version int    `json:"version"`
	Mode    string `json:"mode"`
	// Train is Config.Train, left out for TrainDelegator: run files
	// written before the field existed resume as delegator runs.
	Train         string        `json:"train,omitempty"`
	Solver        string        `json:"solver"`
	Delegator     string        `json:"delegator"`
	Peers         []string      `json:"peers,omitempty"`
	World         world.Config  `json:"world"`
	Seed          uint64        `json:"seed"`
	TrainProblems int           `json:"train_problems"`
	Reward        reward.Graded `json:"reward"`
	Estimator     string        `json:"estimator"`
	GroupSize     int           `json:"group_size"`
	ItemsPerStep  int           `json:"items_per_step"`
	// CacheMinTokens prices every record's calls: records priced two ways
	// must not share a table.
	CacheMinTokens int `json:"cache_min_tokens"`
	// Parity is Config.Parity (decompose's reward), left out when false.
	Parity bool `json:"parity,omitempty"`
	// RLSeed is Config.RLSeed. A run file written before it could be set
	// lacks it, and resumes as a seed-1 run.
	RLSeed uint64 `json:"rl_seed"`
	// StrictToolCalls is Config.StrictToolCalls, left out when false.
	StrictToolCalls bool `json:"strict_tool_calls,omitempty"`
	// Credit is Config.Credit, left out for reward.CreditTask: run files
	// written before the field existed resume as task-credit runs.
	Credit string `json:"credit,omitempty"`
	// TrainingReward is the cost-aware training reward's kind and settings
	// (reward.Config.Describe). It is "" for Reward, so run files written
	// before it existed resume.
	TrainingReward string `json:"training_reward,omitempty"`
	// The counterfactual credit's variants and the entropy bonus, each
	// left out when off, so that run files written before them resume.
	SkipCredit   bool    `json:"skip_credit,omitempty"`
	CentreCalls  bool    `json:"centre_calls,omitempty"`
	InlineCredit bool    `json:"inline_credit,omitempty"`
	EntropyBonus float64 `json:"entropy_bonus,omitempty"`
	// The optimizer's and the rollouts' settings. A run file written
	// before they were recorded lacks them; it is a run of their
	// defaults (olderRun).
	LR           float64 `json:"lr"`
	MinLR        float64 `json:"min_lr"`
	ClipEps      float64 `json:"clip_eps"`
	KLBeta       float64 `json:"kl_beta"`
	Epochs       int     `json:"epochs"`
	Temperature  float64 `json:"temperature"`
	MaxNewTokens int     `json:"max_new_tokens"`
	MaxTurns     int     `json:"max_turns"`
	// MLPO's team and filter, left out under the other modes.
	PeerCount     int     `json:"peer_count,omitempty"`
	PeerSamples   int     `json:"peer_samples,omitempty"`
	FilterMaxRate float64 `json:"filter_max_rate,omitempty"`
}

func identityOf(c Config) identity {
	id := identity{
		Version: identityVersion, Mode: c.Mode, Train: trainIdentity(c.Train), Solver: c.Solver, Delegator: c.Delegator, Peers: c.Peers,
		World: c.World, Seed: c.Seed, TrainProblems: c.TrainProblems, Reward: c.Reward,
		Estimator: string(c.RL.Estimator), GroupSize: c.RL.GroupSize, ItemsPerStep: c.RL.ItemsPerStep,
		CacheMinTokens: c.CacheMinTokens, Parity: c.Parity, RLSeed: c.RLSeed(), StrictToolCalls: c.StrictToolCalls,
		Credit: creditIdentity(c.Credit), TrainingReward: trainingRewardIdentity(c),
		SkipCredit: c.SkipCredit, CentreCalls: c.CentreCalls, InlineCredit: c.InlineCredit, EntropyBonus: c.RL.EntropyBonus,
		LR: c.RL.Schedule.MaxLR, MinLR: c.RL.Schedule.MinLR, ClipEps: c.RL.ClipEps, KLBeta: c.RL.KLBeta, Epochs: c.RL.Epochs,
		Temperature: c.RL.Temperature, MaxNewTokens: c.RL.MaxNewTokens, MaxTurns: c.MaxTurns,
	}
	if c.Mode == ModeMLPO {
		id.PeerCount, id.PeerSamples, id.FilterMaxRate = c.PeerCount, c.PeerSamples, c.FilterMaxRate
	}
	return id
}

// olderRun is the identity of a run of mode with delegate train's
// defaults. A key absent from a run file takes its value here: a setting
// recorded only by later versions is then its default, and one left out
// when off is off.
func olderRun(mode string) identity {
	c := DefaultConfig()
	c.Mode = mode
	if mode == ModeMLPO {
		c.RL.KLBeta, c.PeerCount = MLPOKLBeta, MLPOPeerCount
	}
	return identityOf(c)
}

// trainIdentity is Config.Train as RunFile records it.
func trainIdentity(t string) string {
	if t == TrainDelegator {
		return ""
	}
	return t
}

// trainingRewardIdentity is the cost-aware reward of c's training as
// RunFile records it: "" when training rewards with Config.Reward.
func trainingRewardIdentity(c Config) string {
	if !c.costReward() {
		return ""
	}
	rc := c.CostReward
	rc.Kind = c.RewardKind
	return rc.Describe()
}

// creditIdentity is Config.Credit as RunFile records it.
func creditIdentity(c string) string {
	if c == reward.CreditTask {
		return "" // and "" stays ""
	}
	return c
}

// checkIdentity writes RunFile in a new OutDir. Otherwise it checks that
// the run there is cfg's, naming the first setting that differs.
func checkIdentity(cfg Config) error {
	path := filepath.Join(cfg.OutDir, RunFile)
	want := identityOf(cfg)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, err := json.MarshalIndent(want, "", "  ")
		if err == nil {
			err = os.WriteFile(path, append(b, '\n'), 0o644)
		}
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	var got identity
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("train: run file %s: %w", path, err)
	}
	if got.Version != identityVersion {
		return fmt.Errorf("train: run file %s has version %d, this program writes %d: use another --out", path, got.Version, identityVersion)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return fmt.Errorf("train: run file %s: %w", path, err)
	}
	gv, wv, ov := reflect.ValueOf(&got).Elem(), reflect.ValueOf(want), reflect.ValueOf(olderRun(got.Mode))
	for i := range gv.NumField() {
		key, _, _ := strings.Cut(reflect.TypeFor[identity]().Field(i).Tag.Get("json"), ",")
		_, present := keys[key]
		if !present {
			gv.Field(i).Set(ov.Field(i))
		}
		if reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			continue
		}
		there := fmt.Sprintf("%s %v there", key, gv.Field(i).Interface())
		switch {
		case !present && gv.Field(i).IsZero():
			there = key + " absent there"
		case !present:
			there = fmt.Sprintf("%s absent there, which means %v", key, gv.Field(i).Interface())
		}
		return fmt.Errorf("train: %s holds another run (%s, %v now): use another --out to start a new run, or the same settings to resume it",
			cfg.OutDir, there, wv.Field(i).Interface())
	}
	return nil
}
