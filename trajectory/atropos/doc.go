// Package atropos serves the trajectory API of NousResearch/atropos
// (atroposlib/api/server.py). An existing Atropos trainer or environment
// runs against delegate unchanged. The queue lives durably in NATS
// JetStream instead of in memory.
//
// Environments register (POST /register-env), push scored groups (POST
// /scored_data, /scored_data_list) and pace themselves with GET
// /status-env; a trainer registers (POST /register) and polls GET /batch.
// Batches are assembled with Atropos's rules: a group is never split,
// batch_size counts sequences, groups of other sizes are packed into
// packs of the largest group size, environments with a
// min_batch_allocation get their share first, and groups smaller than
// the environment's declared group_size wait in a buffer until some of
// them sum to it.
//
// Extensions, all invisible to an Atropos client:
//   - a group larger than its environment's group_size, which Atropos
//     buffers for good, is queued at once and counts as whole packs of
//     group_size in a batch, so a batch never holds more than batch_size
//     sequences; one that could never fit a batch gets 422;
//   - every accepted group is stored in a JetStream stream and a push is
//     answered only after JetStream acknowledged it;
//   - every batch is recorded under its step before it is sent, so a
//     restart never hands it out again, and GET /batch?step=N sends the
//     batch of step N again (the response carries "step");
//   - a group pushed twice (same group_overrides.group_id, or the same
//     content) is stored once and counted;
//   - group_overrides.policy_version records the trainer step the
//     rollouts were sampled with; with Config.MaxStaleness set, groups
//     more steps behind are dropped at batch time and counted;
//   - GET /metrics serves Prometheus metrics (groups, batches, queue,
//     held requests, request latency by route);
//   - an optional bearer token guards every endpoint, /metrics included.
//
// The Server keeps only small metadata per queued group in memory (stream
// sequence, environment, size, policy version); bodies stay in JetStream
// and are read when a batch is sent. One Server owns one stream prefix:
// run one API process per training run.
package atropos
