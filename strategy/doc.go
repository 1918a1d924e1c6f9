// Package strategy runs a request through one of four ways of delegating.
// Each is plain Go over delegate.Model and returns the trace of every call,
// so that strategies compare on the same accounting. New builds one; Config
// and DefaultConfig hold every knob, and Config.Validate checks them.
// Prompts are text/template files embedded in the binary, listed by
// PromptNames, and Config.Prompts overrides them by name.
//
// # Trace shape
//
// Every model call is recorded by a delegate.Recorder, so each call node
// carries role, model, messages, output, usage, cost, latency, retries,
// finish reason and error. Node names are part of the contract; this
// package's constants and builders make them. Numbering starts at 1 except
// for rounds:
//
//	single
//	└── answer                          call, role single
//	decompose
//	├── plan                            group; Error = the plan failure, if any
//	│   └── delegator                   call, role delegator
//	├── subagents                       group
//	│   ├── subagent 1                  call, role subagent
//	│   ├── subagent 1 retry            call, the repeat of a failed subagent 1
//	│   └── subagent 2 ...              (calls run concurrently: IDs follow start order)
//	└── aggregate                       group
//	    └── delegator                   call, role delegator
//	route
//	├── turn 1                          group
//	│   ├── strong                      call, role strong (offered the delegate tool)
//	│   ├── delegate call_abc           call, role weak: the tool call with ID call_abc
//	│   ├── delegate call_def           group with Error: arguments rejected, no call made
//	│   └── tool call_xyz               group with Error: a call of an unknown tool
//	└── turn 2 ...
//	lead
//	├── round 0                         group
//	│   ├── peer 1 .. peer K            calls, role peer
//	│   └── leader                      call, role leader
//	└── round 1 .. round T              the same
//
// Roles are the Agents' Role fields, defaulting to the Role* names. A run
// that produced no proper answer says why. Trace.FailureKind holds one of
// the root package's Failure* kinds. Trace.Failure holds the message,
// "<kind>: <detail>", or "plan <PlanReason>: <detail>" for a rejected plan.
//
// # Concurrency and events
//
// A strategy is safe for concurrent Runs. Run sends live events by
// non-blocking sends to the channel it is given, which may be nil. The
// caller owns the channel and closes it after Run returns. Events a full
// channel does not take are counted in Trace.DroppedEvents, never waited
// for. Model failures are recorded in the trace, not returned. Run returns
// an error only when a goroutine panicked or its context ended the run; then
// the partial trace has Failure "canceled".
package strategy
