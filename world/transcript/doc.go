// Package transcript is what the models of package world say. It holds
// the prompts, every strategy's transcripts, their token bills and the
// pretraining corpus built from them, so pretraining, evaluation and the
// design figures share one format.
//
// # Prompts
//
// Prompts overrides every strategy prompt template with a compact one: two
// or three words of system prompt, then the bare request. StrategyConfig
// returns the strategy configuration that uses them. Route declares the
// delegate tool by its name only, Tool, through strategy.Config.Tool. So
// strategy.New on the local models sends exactly the prompts of the
// transcripts. A test replays every strategy against the transcripts and
// compares each request token for token. SingleMessages and
// SolverMessages are the first messages of a delegator solving alone and
// of the solver asked one question.
//
// # Transcripts
//
// Single, Route, Decompose and Lead build an Episode per problem: the
// delegator's conversations and the sub-agents'. They are written in
// world's formats, world.Scratchpad and world.SolverAnswer. Route and
// Decompose take a world.Policy per step; DelegateCall is the delegate
// call route writes. Lead shows the leader K terse peer solutions,
// PeerAnswer's, some wrong, sometimes the majority. It teaches the leader
// to copy the steps they agree on and to compute those they dispute.
// Condense turns a scratchpad reply into such a terse solution, so peers
// that need scratch work can take part.
//
// # Bills
//
// Transcript.Usage bills one conversation under package tokenizer's chat
// template: one token per byte plus the specials. It counts the prefix a
// backend keeps cached. Episode.Bill sums an episode into a world.Account,
// which world.DefaultPrices prices and world.RewardOf rewards.
//
// # Corpus
//
// BuildCorpus mixes never, always and random delegation per problem, as
// Mix says.
// So the pretrained delegator is a stochastic policy RL can sharpen. It
// adds single, decompose and lead transcripts for a share of the problems.
// SolverCorpus draws the solver's transcripts evenly over its covered
// sizes, world.SolverSizes, and the world's own steps. They stay inside a
// world.Coverage; the digits world's solver is trained on a narrower one.
//
// # Design figures
//
// Measure and Report compute the expected cost and reward of every
// protocol and policy before any model exists. They assume an accuracy
// profile, DesignAccuracy. They also give the corpus's sequence lengths.
// These are the design figures of docs/world.md; this prints them:
//
//	go test ./world/transcript -run TestDesignFigures -v
package transcript
