// Package strategy runs a request through one of four ways of delegating,
// written as plain Go over delegate.Model, and returns the trace of every
// call:
//
//   - single: one call to the Single agent, the baseline. Its prompt asks for
//     reasoning, then a "Final answer:" line (and \boxed{} for a number).
//   - decompose: the Delegator plans (reasoning in <|reasoning|> tags, then
//     MinSubtasks..MaxSubtasks subtasks in <|subtask|> tags, see ParsePlan);
//     Subagent calls run concurrently, one per subtask, each repeated on
//     failure up to SubagentRetries times and each output cut to the
//     subagent.max_tokens budget (see CutToBudget); the Delegator aggregates
//     the "Subtask i / Result i" pairs into the text after "Final Output:".
//   - route: the Strong agent may call the delegate tool (DelegateTool), which
//     sends a self-contained question to the Weak agent; a turn's calls run
//     concurrently; the run ends at the first turn without tool calls, whose
//     answer is the last \boxed{} or the text after "Final answer:" (see
//     delegate.ExtractAnswer), or after MaxTurns turns with Failure "max turns".
//   - lead: K Peers answer independently, the Leader aggregates into an
//     <answer>; then Rounds rounds of peers refining given the leader's last
//     output and the leader aggregating again. The answer is the leader's last.
//
// Build one with New(name, roles, cfg); Config and DefaultConfig hold every
// knob and Config.Validate checks them. Prompts are text/template files
// embedded in the binary (PromptNames lists them) and can be overridden by
// name through Config.Prompts.
//
// # Trace shape
//
// Every model call is recorded by a delegate.Recorder, so each call node
// carries role, model, messages, output, usage, cost, latency, retries,
// finish reason and error. Node names (constants and builders in this
// package) are part of the contract; numbering starts at 1 except rounds:
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
// that produced no proper answer says why: Trace.FailureKind holds one of
// the root package's Failure* kinds, Trace.Failure the message, "<kind>:
// <detail>" or, for a rejected plan, "plan <PlanReason>: <detail>".
//
// # Concurrency and events
//
// A strategy is safe for concurrent Runs. Run sends live events by
// non-blocking sends to the channel it is given (which may be nil); the
// caller owns and closes it after Run returns. Events a full channel does
// not take are counted in Trace.DroppedEvents, never waited for. Model
// failures are recorded in the trace, not returned; Run returns an error
// only when its context ended the run (with the partial trace, Failure
// "canceled") or a goroutine panicked.
package strategy
