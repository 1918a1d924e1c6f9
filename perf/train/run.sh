#!/usr/bin/env bash
# run.sh: training throughput of package nn against the kernel's own matmul
# rate, measured side by side in the same run.
#
#   perf/train/run.sh [PROCS...]     (default: 1 2)
#
# For each GOMAXPROCS value it runs BenchmarkTrainStep (nn/train/bench_test.go):
# full optimizer steps (forward, backward, clipping, AdamW) on two model
# shapes, then the kernel's MatMulNT on the model's MLP shape in the same
# process. It prints tokens/s, achieved GFLOPS (counted by stepFLOPs),
# the matmul GFLOPS, the ratio, and PASS when the ratio is at least 50%;
# then the same ratio from the process's CPU time (cpu-ratio), which other
# processes on a shared machine disturb less.
set -euo pipefail
cd "$(dirname "$0")/../.."
procs=("$@")
[[ ${#procs[@]} -gt 0 ]] || procs=(1 2)
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, $(go version | cut -d' ' -f3), kernel $(go run ./perf/train/impl 2>/dev/null || echo unknown)"
echo "load average at start: $(cut -d' ' -f1 /proc/loadavg)"
printf '%-6s %-32s %10s %10s %14s %9s %7s %10s %s\n' procs model tok/s GFLOPS matmul-GFLOPS ratio target cpu-ratio cpu-target
for p in "${procs[@]}"; do
	GOMAXPROCS=$p go test -run '^$' -bench 'TrainStep' -benchtime 10x ./nn/train/ |
		awk -v p="$p" '/^BenchmarkTrainStep/ {
			name=$1; sub(/^BenchmarkTrainStep\//, "", name); sub(/-[0-9]+$/, "", name)
			for (i = 3; i < NF; i++) v[$(i+1)] = $i
			r = v["%matmul"]; rc = v["%matmul-cpu"]
			printf "%-6s %-32s %10.0f %10.1f %14.1f %8.1f%% %7s %9.1f%% %s\n", p, name, v["tok/s"], v["GFLOPS"], v["matmul-GFLOPS"], r, (r >= 50 ? "PASS" : "MISS"), rc, (rc >= 50 ? "PASS" : "MISS")
		}'
done
