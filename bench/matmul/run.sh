#!/usr/bin/env bash
# Compares nn/kernel's matmul with OpenBLAS cblas_sgemm, single-threaded, on
# the model's shapes, and prints a table: shape, ours GFLOPS, OpenBLAS GFLOPS,
# ratio, PASS/MISS against the target ours >= 60% of OpenBLAS.
#
# Usage: bench/matmul/run.sh [ops]     (default ops: "NT NN TN")
# Env:   BENCHTIME (go test -benchtime per shape, default 300ms)
#        SECONDS_PER_SHAPE (OpenBLAS timing budget per shape, default 0.3)
#        DELEGATE_KERNEL_GENERIC=1 benchmarks the pure-Go kernel instead.
# Installs Debian's libopenblas-dev when missing (needs root and apt).
# OpenBLAS is used only here, never by the Go build.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/bench/matmul"
ops=${1:-"NT NN TN"}
benchtime=${BENCHTIME:-300ms}
budget=${SECONDS_PER_SHAPE:-0.3}
shapes="512x256x256 512x256x768 512x768x256 512x256x384 32x256x256 1x256x768 512x512x512 1024x1024x1024"

if [ ! -e /usr/include/x86_64-linux-gnu/cblas.h ] && [ ! -e /usr/include/cblas.h ] && ! ls /usr/include/*/cblas.h >/dev/null 2>&1; then
	echo "installing libopenblas-dev" >&2
	if ! apt-get install -y libopenblas-dev >&2; then
		apt-get update >&2
		apt-get install -y libopenblas-dev >&2
	fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/sgemm" "$here/sgemm.c" -lopenblas

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, $(go version | cut -d' ' -f3)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (timings are noisy when this is high)"

args=()
for op in $ops; do
	for s in $shapes; do
		IFS=x read -r m k n <<<"$s"
		args+=("$op" "$m" "$k" "$n")
	done
done
OPENBLAS_NUM_THREADS=1 "$tmp/sgemm" "$budget" "${args[@]}" >"$tmp/blas.txt"

impl=avx2
if [ "${DELEGATE_KERNEL_GENERIC:-}" = 1 ] || ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
	impl=go
fi
opre=$(echo "$ops" | tr ' ' '|')
(cd "$root" && GOMAXPROCS=1 go test -run='^$' -bench="BenchmarkMatMul/($opre)/.*/$impl/serial\$" \
	-benchtime="$benchtime" ./nn/kernel) >"$tmp/go.txt"

printf '%-4s %-16s %10s %14s %7s  %s\n' op "m x k x n" "ours" "OpenBLAS" ratio "target >= 0.60"
pass=0 total=0
while read -r op m k n blas; do
	ours=$(awk -v pat="BenchmarkMatMul/$op/m${m}k${k}n${n}/$impl/serial" \
		'index($1, pat) == 1 { for (i = 1; i < NF; i++) if ($(i+1) == "GFLOPS") print $i }' "$tmp/go.txt")
	if [ -z "$ours" ]; then
		echo "no Go result for $op $m x $k x $n" >&2
		exit 1
	fi
	ratio=$(awk -v a="$ours" -v b="$blas" 'BEGIN { printf "%.2f", a / b }')
	verdict=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.60) ? "PASS" : "MISS" }')
	total=$((total + 1))
	[ "$verdict" = PASS ] && pass=$((pass + 1))
	printf '%-4s %-16s %10.1f %14.1f %7s  %s\n' "$op" "${m}x${k}x${n}" "$ours" "$blas" "$ratio" "$verdict"
done <"$tmp/blas.txt"
echo "GFLOPS single-threaded (ours: $impl kernel, GOMAXPROCS=1; OpenBLAS: OPENBLAS_NUM_THREADS=1); $pass/$total shapes pass"
