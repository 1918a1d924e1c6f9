//go:build race

package tokenizer

// raceEnabled is set when the tests run under the race detector, which slows them greatly.
// The comparisons with the reference then check every raceStride-th string
// and skip the Qwen3 file, whose code paths the Qwen2.5 and GPT-2 files
// already cover. The full comparison runs without -race.
const raceEnabled = true
