// Command llamacpp compares our engine's q8_0 decoding with llama.cpp's on the same GGUF file.
// run.sh builds llama.cpp, writes the files and calls it; README.md explains the method.
//
//	llamacpp write -dir DIR
//	llamacpp bench -hf DIR -gguf FILE -llama-bench PATH [-threads 1,2] [-n 32] [-reps 5]
//	llamacpp tokens -hf DIR -gguf FILE [-llama-simple PATH] [-prompt P] [-n 32]
//
// write puts a seeded random checkpoint of Qwen2.5-0.5B's shape in DIR, in
// bfloat16 with a byte-level BPE tokenizer of Qwen2.5's sizes.
//
// bench times batch-1 greedy decoding at each thread count: llama-bench's
// tg test on the GGUF file, then our engine on the GGUF file as stored
// (q8_0), then on DIR quantised to q8_0 at load, the three interleaved in
// each repetition. It prints the median (min-max) tokens per second of
// each, our GGUF's rate over llama.cpp's, and PASS when that is at least
// -target. A verdict at more threads is marked not meaningful when
// llama.cpp ran slower there than at the first thread count.
//
// tokens checks that the GGUF file and DIR give our engine the same greedy
// tokens on a prompt, and counts how many of them llama-simple prints too.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/delegatelab/delegate/local"
	"github.com/delegatelab/delegate/nn/infer"
	"github.com/delegatelab/delegate/perf/internal/hfgen"
	"github.com/delegatelab/delegate/tokenizer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llamacpp:", err)
		os.Exit(1)
	}
}

// shapes are the checkpoints write can make.
var shapes = map[string]hfgen.Shape{
	// Qwen2.5-0.5B: 494M parameters, tied head, 151936-token vocabulary.
	"qwen0.5b": {ModelType: "qwen2", Dim: 896, Hidden: 4864, Layers: 24, Heads: 14, KV: 2, Vocab: 151936, Tied: true,
		Context: 32768, NormEps: 1e-6, RopeTheta: 1e6},
	// A toy of the same kind, for the program's own test.
	"tiny": {ModelType: "qwen2", Dim: 64, Hidden: 128, Layers: 2, Heads: 4, KV: 2, Vocab: 1024, Tied: true,
		Context: 256, NormEps: 1e-6, RopeTheta: 1e6},
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: write, bench or tokens")
	}
	switch args[0] {
	case "write":
		return write(args[1:])
	case "bench":
		return bench(args[1:], stdout)
	case "tokens":
		return tokens(args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q (want write, bench or tokens)", args[0])
}

func write(args []string) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the checkpoint into")
	shapeName := fs.String("shape", "qwen0.5b", "model shape: qwen0.5b or tiny")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sh, ok := shapes[*shapeName]
	if !ok {
		return fmt.Errorf("unknown shape %q (want qwen0.5b or tiny)", *shapeName)
	}
	if *dir == "" {
		return errors.New("write: -dir is required")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	if err := hfgen.Write(*dir, sh, "BF16"); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", *dir, err)
	}
	if err := writeTokenizer(*dir, sh.Vocab); err != nil {
		return fmt.Errorf("write tokenizer %s: %w", *dir, err)
	}
	if err := setSpecialIDs(*dir, min(firstSpec, sh.Vocab-len(specials))); err != nil {
		return fmt.Errorf("write config %s: %w", *dir, err)
	}
	return nil
}

// sides are what bench times, in the order of each repetition.
var sides = []string{"llama.cpp gguf", "ours gguf", "ours hf"}

func bench(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	hfDir := fs.String("hf", "", "Hugging Face checkpoint directory")
	ggufPath := fs.String("gguf", "", "q8_0 GGUF file of the same checkpoint")
	llamaBench := fs.String("llama-bench", "", "llama.cpp's llama-bench binary")
	threads := fs.String("threads", "1,2", "thread counts, comma-separated")
	steps := fs.Int("n", 32, "tokens decoded per measurement")
	reps := fs.Int("reps", 5, "repetitions; the median is reported")
	target := fs.Float64("target", 0.9, "ours over llama.cpp's tok/s needed for PASS")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hfDir == "" || *ggufPath == "" || *llamaBench == "" {
		return errors.New("bench: -hf, -gguf and -llama-bench are required")
	}
	procs, err := parseThreads(*threads)
	if err != nil {
		return err
	}
	opt := infer.HFOptions{Context: *steps + 1}
	gw, ginfo, err := infer.LoadGGUF(*ggufPath, opt)
	if err != nil {
		return err
	}
	opt.Quantize = "q8_0"
	hw, hinfo, err := infer.LoadHF(*hfDir, opt)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "llamacpp: machine %s, %d cores, %s/%s, %s\n", cpuName(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(stdout, "llamacpp: ours gguf %s %.1f MB, ours hf %s %.1f MB (quantised at load)\n",
		ginfo.DType, float64(gw.Bytes())/1e6, hinfo.DType, float64(hw.Bytes())/1e6)
	weights := []*infer.Weights{gw, hw}

	rates := map[int][][]float64{} // threads → side → tok/s of each repetition
	var first benchRecord
	for _, p := range procs {
		fmt.Fprintf(stdout, "llamacpp: %d thread(s), load %s before\n", p, loadAvg())
		rates[p] = make([][]float64, len(sides))
		prev := runtime.GOMAXPROCS(p)
		engines := make([]*infer.Engine, len(weights))
		for i, w := range weights {
			ec := infer.DefaultEngineConfig()
			ec.MaxBatch = 1
			e, err := infer.NewEngineWeights(w, ec)
			if err != nil {
				return err
			}
			defer e.Close()
			engines[i] = e
			// A short warm-up, as llama-bench makes one before it times.
			if _, err := e.Generate(context.Background(), infer.GenRequest{Prompt: []int{1}, MaxNew: 2}); err != nil {
				return err
			}
		}
		for r := range *reps {
			rec, err := runLlamaBench(*llamaBench, *ggufPath, p, *steps)
			if err != nil {
				return err
			}
			if first.BuildCommit == "" {
				first = rec
			}
			rates[p][0] = append(rates[p][0], rec.AvgTS)
			for i, e := range engines {
				t0 := time.Now()
				res, err := e.Generate(context.Background(), infer.GenRequest{Prompt: []int{1}, MaxNew: *steps})
				if err != nil {
					return err
				}
				el := time.Since(t0).Seconds()
				if len(res.Tokens) != *steps {
					return fmt.Errorf("%s generated %d tokens, want %d", sides[i+1], len(res.Tokens), *steps)
				}
				rates[p][i+1] = append(rates[p][i+1], float64(*steps)/el)
			}
			line := fmt.Sprintf("llamacpp: %d thread(s) rep %d", p, r+1)
			for i, s := range sides {
				line += fmt.Sprintf(", %s %.2f", s, rates[p][i][r])
			}
			fmt.Fprintln(stdout, line+" tok/s")
		}
		for _, e := range engines {
			e.Close()
		}
		runtime.GOMAXPROCS(prev)
		fmt.Fprintf(stdout, "llamacpp: %d thread(s), load %s after\n", p, loadAvg())
	}
	fmt.Fprintf(stdout, "llamacpp: llama-bench build %s (%d), model %s, %s, %s; %d tokens decoded from an empty context\n",
		first.BuildCommit, first.BuildNumber, first.ModelType, first.CPUInfo, first.Backends, *steps)
	fmt.Fprintf(stdout, "\n| threads | llama.cpp tok/s | ours gguf tok/s | ours hf tok/s | ours gguf / llama.cpp | verdict (>= %.2f) |\n|---|---|---|---|---|---|\n", *target)
	for _, p := range procs {
		r := rates[p]
		per := make([]float64, len(r[0]))
		for i := range per {
			per[i] = r[1][i] / r[0][i]
		}
		ratio := median(r[1]) / median(r[0])
		verdict := "MISS"
		if ratio >= *target {
			verdict = "PASS"
		}
		if p > procs[0] && median(r[0]) < median(rates[procs[0]][0]) {
			// More threads made llama.cpp slower: its threads spin for
			// each other, and other processes on the cores stall them.
			verdict += fmt.Sprintf(", not meaningful (llama.cpp slower than at %d thread(s))", procs[0])
		}
		fmt.Fprintf(stdout, "| %d | %s | %s | %s | %.2f [%s per rep] | %s |\n", p, spread(r[0]), spread(r[1]), spread(r[2]), ratio, spread(per), verdict)
	}
	fmt.Fprintf(stdout, "\nmedian (min-max) of %d repetitions; the ratio is of the medians, then the median (min-max) of each repetition's ratio\n", *reps)
	return nil
}

// benchRecord is the part of a llama-bench JSONL line bench reads.
type benchRecord struct {
	BuildCommit string  `json:"build_commit"`
	BuildNumber int     `json:"build_number"`
	CPUInfo     string  `json:"cpu_info"`
	Backends    string  `json:"backends"`
	ModelType   string  `json:"model_type"`
	NThreads    int     `json:"n_threads"`
	NPrompt     int     `json:"n_prompt"`
	NGen        int     `json:"n_gen"`
	AvgTS       float64 `json:"avg_ts"`
}

// runLlamaBench runs llama-bench's tg test once, with its own warm-up, and returns its record.
func runLlamaBench(bin, model string, threads, steps int) (benchRecord, error) {
	cmd := exec.Command(bin, "-m", model, "-p", "0", "-n", strconv.Itoa(steps), "-t", strconv.Itoa(threads), "-r", "1", "-o", "jsonl")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return benchRecord{}, fmt.Errorf("llama-bench -t %d: %w: %s", threads, err, lastLine(errb.String()))
	}
	rec, err := parseBench(out.Bytes())
	if err != nil {
		return benchRecord{}, fmt.Errorf("llama-bench -t %d: %w", threads, err)
	}
	if rec.NThreads != threads || rec.NGen != steps || rec.NPrompt != 0 {
		return benchRecord{}, fmt.Errorf("llama-bench ran %d threads, %d prompt and %d generated tokens; want %d, 0 and %d",
			rec.NThreads, rec.NPrompt, rec.NGen, threads, steps)
	}
	return rec, nil
}

// parseBench reads the one record of llama-bench's JSONL output.
func parseBench(out []byte) (benchRecord, error) {
	var recs []benchRecord
	for _, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r benchRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return benchRecord{}, fmt.Errorf("parse output line %q: %w", line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 1 {
		return benchRecord{}, fmt.Errorf("got %d records, want 1", len(recs))
	}
	if recs[0].AvgTS <= 0 {
		return benchRecord{}, fmt.Errorf("avg_ts %v is not a rate", recs[0].AvgTS)
	}
	return recs[0], nil
}

func tokens(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tokens", flag.ContinueOnError)
	hfDir := fs.String("hf", "", "Hugging Face checkpoint directory")
	ggufPath := fs.String("gguf", "", "q8_0 GGUF file of the same checkpoint")
	llamaSimple := fs.String("llama-simple", "", "llama.cpp's llama-simple binary; empty: skip llama.cpp")
	prompt := fs.String("prompt", "The quick brown fox jumps over the lazy dog.", "prompt text")
	steps := fs.Int("n", 32, "greedy tokens generated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hfDir == "" || *ggufPath == "" {
		return errors.New("tokens: -hf and -gguf are required")
	}
	gt, err := infer.ReadGGUFTokenizer(*ggufPath)
	if err != nil {
		return err
	}
	gtok, err := local.GGUFTokenizer(gt)
	if err != nil {
		return err
	}
	htok, err := tokenizer.LoadHF(filepath.Join(*hfDir, "tokenizer.json"))
	if err != nil {
		return err
	}
	gids, hids := gtok.Encode(*prompt), htok.Encode(*prompt)
	if !slices.Equal(gids, hids) {
		return fmt.Errorf("the prompt encodes to %v with the gguf's tokenizer, %v with tokenizer.json", gids, hids)
	}
	fmt.Fprintf(stdout, "tokens: prompt %q is %d tokens with both tokenizers: %v\n", *prompt, len(gids), gids)

	opt := infer.HFOptions{Context: len(gids) + *steps + 1}
	gw, _, err := infer.LoadGGUF(*ggufPath, opt)
	if err != nil {
		return err
	}
	opt.Quantize = "q8_0"
	hw, _, err := infer.LoadHF(*hfDir, opt)
	if err != nil {
		return err
	}
	var outs [][]int
	var tops [][][]infer.TokenLogprob
	for _, w := range []*infer.Weights{gw, hw} {
		e, err := infer.NewEngineWeights(w, infer.DefaultEngineConfig())
		if err != nil {
			return err
		}
		res, err := e.Generate(context.Background(), infer.GenRequest{Prompt: gids, MaxNew: *steps, TopLogprobs: topN})
		e.Close()
		if err != nil {
			return err
		}
		outs, tops = append(outs, res.Tokens), append(tops, res.Top)
	}
	same := commonPrefix(outs[0], outs[1])
	fmt.Fprintf(stdout, "tokens: ours gguf %v\ntokens: ours hf   %v\n", outs[0], outs[1])
	if same != len(outs[0]) || len(outs[0]) != len(outs[1]) {
		return fmt.Errorf("ours on the gguf and on the hf files agree on the first %d greedy tokens only (of %d and %d)", same, len(outs[0]), len(outs[1]))
	}
	for i := range tops[0] {
		if !slices.Equal(tops[0][i], tops[1][i]) {
			return fmt.Errorf("step %d: the top %d logprobs differ: gguf %v, hf %v", i, topN, tops[0][i], tops[1][i])
		}
	}
	fmt.Fprintf(stdout, "tokens: ours on the gguf and on the hf files: the same %d greedy tokens and bitwise the same top-%d logprobs at each step: SAME (smallest gap between best and second %.4g)\n",
		same, topN, smallestGap(tops[0]))
	if *llamaSimple == "" {
		return nil
	}
	cmd := exec.Command(*llamaSimple, "-m", *ggufPath, "-n", strconv.Itoa(*steps), *prompt)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("llama-simple: %w: %s", err, lastLine(errb.String()))
	}
	pieces := make([]string, len(outs[0]))
	for i, id := range outs[0] {
		if pieces[i], err = gtok.Decode([]int{id}); err != nil {
			return err
		}
	}
	n, rest := agreeing(out.String(), *prompt, pieces)
	fmt.Fprintf(stdout, "tokens: llama-simple (greedy) prints the first %d of our %d greedy tokens", n, len(pieces))
	if n < len(pieces) {
		fmt.Fprintf(stdout, "; then it prints %q where ours is %q", rest, pieces[n])
	}
	fmt.Fprintln(stdout)
	return nil
}

// topN is how many likeliest tokens tokens compares at each step.
const topN = 5

// smallestGap is the smallest difference between the best and the second-best logprob over the steps.
func smallestGap(top [][]infer.TokenLogprob) float64 {
	gap := math.Inf(1)
	for _, t := range top {
		if len(t) > 1 {
			gap = min(gap, float64(t[0].Logprob-t[1].Logprob))
		}
	}
	return gap
}

// agreeing counts how many of pieces llama-simple's output prints in order after the prompt.
// rest is a little of what it printed at the first piece that differs.
func agreeing(out, prompt string, pieces []string) (n int, rest string) {
	s, ok := strings.CutPrefix(out, prompt)
	if !ok {
		return 0, head(out, 40)
	}
	for n < len(pieces) && strings.HasPrefix(s, pieces[n]) {
		s = s[len(pieces[n]):]
		n++
	}
	return n, head(s, 40)
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func parseThreads(s string) ([]int, error) {
	var procs []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 {
			return nil, fmt.Errorf("threads %q: want positive integers", s)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread formats v as its median (min-max), to about three significant digits.
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%s-%s)", sig3(median(v)), sig3(slices.Min(v)), sig3(slices.Max(v)))
}

// sig3 formats x with two decimals below 10, one below 100 and none above.
func sig3(x float64) string {
	switch {
	case x < 10:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 100:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// loadAvg is the one-minute load average from /proc/loadavg, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

// cpuName is the CPU's model name from /proc/cpuinfo, or "unknown".
func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
