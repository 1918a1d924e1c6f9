// Package transcript is what the models of package world say. It holds
// the prompts, every strategy's transcripts, their token bills and the
// pretraining corpus built from them, so pretraining, evaluation and the
// design figures share one format.
//
// # Prompts
//
// Prompts overrides every strategy prompt template with a compact one
// (two or three words of system prompt, the bare request), and
// StrategyConfig returns the strategy configuration that uses them, so
// strategy.New on the local models (route declaring the delegate tool as
// its name only, Tool, through strategy.Config.Tool) sends exactly the
// prompts of the transcripts (a test replays
// every strategy against the transcripts and compares each request token
// for token). SingleMessages and SolverMessages are the first messages of
// a delegator solving alone and of the solver asked one question.
//
// # Transcripts
//
// Single, Route, Decompose and Lead build an Episode per problem: the
// delegator's conversations and the sub-agents', written in world's
// formats (world.Scratchpad, world.SolverAnswer). Route and Decompose take
// a world.Policy per step; DelegateCall is the delegate call route writes.
// Lead shows the leader K terse peer solutions (PeerAnswer), some wrong
// (sometimes the majority), and teaches it to copy the steps they agree on
// and to compute those they dispute; Condense turns a scratchpad reply
// into such a terse solution, so that peers that need scratch work can
// take part.
//
// # Bills
//
// Transcript.Usage bills one conversation under the chat template of
// package tokenizer (one token per byte plus the specials), with the
// prefix a backend keeps cached; Episode.Bill sums an episode into a
// world.Account, which world.DefaultPrices prices and world.RewardOf
// rewards.
//
// # Corpus
//
// BuildCorpus mixes never, always and random delegation per problem (Mix)
// so the pretrained delegator is a stochastic policy RL can sharpen, plus
// single, decompose and lead transcripts for a share of the problems;
// SolverCorpus draws the solver's transcripts evenly over its covered
// sizes (world.SolverSizes) and the world's own steps, inside a
// world.Coverage (the digits world's solver is trained on a narrower one).
//
// # Design figures
//
// Measure and Report compute the expected cost and reward of every
// protocol and policy under an assumed accuracy profile (DesignAccuracy),
// before any model exists, and the corpus's sequence lengths: the design
// figures of docs/world.md (go test ./world/transcript -run
// TestDesignFigures -v prints them).
package transcript
