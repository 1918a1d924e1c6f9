package main

import (
	"github.com/delegatelab/delegate/trajectory/atropos"
)

// pushFlags are process's and gateway's flags for a trajectory API.
type pushFlags struct {
	url         string  // the API's base URL; "" pushes nothing
	name        string  // the environment's desired name
	weight      float64 // the environment's weight in batches
	maxTokenLen int     // the environment's max_token_length
	offPolicy   int     // max_batches_offpolicy: pause while the queue holds this many batches
	sync        int     // items per trainer step, on-policy; 0: paced by offPolicy (atropos.PushConfig.Sync)
	syncPolicy  string  // with sync, the policy server to wait for (atropos.PushConfig.SyncPolicy)
}

// config is the flags' atropos.PushConfig. The token is the API's bearer
// token (DELEGATE_API_TOKEN), empty for none.
func (f pushFlags) config(token string, groupSize int) atropos.PushConfig {
	return atropos.PushConfig{URL: f.url, Token: token, Name: f.name, Weight: f.weight, MaxTokenLen: f.maxTokenLen,
		GroupSize: groupSize, OffPolicy: f.offPolicy, Sync: f.sync, SyncPolicy: f.syncPolicy}
}
