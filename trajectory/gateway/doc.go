// Package gateway trains any agent by swapping its base URL. It is an
// OpenAI-compatible server over any delegate.Model, built on package
// server's handler. Per session, it records every call an agent makes:
// the request and response, the token ids and their logprobs, the chat
// template's hash, the role, whether it is trained, timing, tokens and
// dollars.
//
// An operator opens a session (POST /sessions), hands the agent its base
// URL (/s/{id}/v1, or /v1 with the session id as the bearer key) and
// ends it with a reward (POST /sessions/{id}/reward), given or verified
// from the task's reference. A verified session's reward is 1 or 0, or
// with Config.Reward the reward `delegate process` would give its calls:
// quality less the cost terms. The session is then stored (package store)
// before the reward is acknowledged. Its calls become samples per role:
// a call whose prompt ids extend a sample's ids extends that sample, any
// other call starts one, so forks stay apart. Once a group's sessions are
// all finished, its samples are appended to groups.jsonl as
// rollout.GroupRecord lines, the layout `delegate process` writes. A Feed,
// set as Config.Sink, hands them to a trainer in the same process.
//
// Session ids are credentials: 256 random bits, expiring, stored and
// logged only as digests.
package gateway
