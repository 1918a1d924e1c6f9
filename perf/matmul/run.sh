#!/usr/bin/env bash
# Compares nn/kernel's matmul with OpenBLAS cblas_sgemm on the model's
# shapes, at one thread and at two, and prints a table: shape, ours GFLOPS,
# OpenBLAS GFLOPS, ratio, PASS/MISS against the target ours >= OpenBLAS.
# Each side's rate is given over wall time and over process CPU time
# ("cpu"); on a loaded machine wall-time rates swing with the load and the
# CPU-time ones are the steadier comparison. At one thread the verdict uses
# the CPU-time ratio. At two it uses the wall-time ratio, since using the
# second core is the point there. After each thread count come two
# summary verdicts: the median shape's ratio, and the worst one-row decode
# shape's. The decode rows, "NTP", time MatMulPacked, the engine's decode
# path, on weights packed once, against cblas_sgemv on the same (n,k)
# weights: what a BLAS user calls for one row.
#
# Usage: perf/matmul/run.sh [ops]     (default ops: "NT NN TN")
# Env:   THREADS (thread counts to run, default "1 2")
#        BENCHTIME (go test -benchtime per run, default 20ms)
#        COUNT (go test runs per shape, best kept, default 10)
#        SECONDS_PER_SHAPE (OpenBLAS timing budget per shape, default 0.6)
#        GOFLAGS=-tags=purego builds without the assembly and benchmarks the
#        pure-Go kernel instead (the go command reads GOFLAGS).
#        IMPL=avx2 (or go) benchmarks that kernel instead of the one the package
#        picks at run time (avx512, avx2 or go); it must be one this CPU runs.
# Installs Debian's libopenblas-dev when missing (needs root and apt).
# OpenBLAS is used only here, never by the Go build.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here="$root/perf/matmul"
ops=${1:-"NT NN TN"}
benchtime=${BENCHTIME:-20ms}
count=${COUNT:-10}
threads=${THREADS:-"1 2"}
budget=${SECONDS_PER_SHAPE:-0.6}
shapes="512x256x256 512x256x768 512x768x256 512x256x384 32x256x256 1x256x768 512x512x512 1024x1024x1024 1x768x2048 1x288x32000"

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
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (timings are noisy when this exceeds the cores)"

(cd "$root" && go test -c -o "$tmp/kernel.test" ./nn/kernel)
# The kernel the package picks on this machine (avx512, avx2 or go), as the
# entry-point benchmark names it.
impl=$("$tmp/kernel.test" -test.run='^$' -test.bench='^BenchmarkEntryPoints/MatMulNT/' -test.benchtime=1x |
	sed -n 's|^BenchmarkEntryPoints/MatMulNT/\([a-z0-9]*\)/.*|\1|p' | head -n1)
if [ -z "$impl" ]; then
	echo "cannot tell which kernel nn/kernel uses" >&2
	exit 1
fi
impl=${IMPL:-$impl}

# best prints the best value of the metric $1 among the benchmark lines
# for op $2, shape $3 and kernel path $4 (e.g. avx512/serial, or packed).
best() {
	awk -v unit="$1" -v pat="BenchmarkMatMul/$2/m$3/$4" \
		'index($1, pat) == 1 { for (i = 1; i < NF; i++) if ($(i+1) == unit && $i > best) best = $i }
		END { if (best != "") print best }' "$tmp/go.txt"
}

# table prints one thread count's rows and its summary verdicts, judged on
# the CPU-time ratio at one thread and the wall-time ratio at more.
table() {
	local t=$1 mode=$2 col=cpu
	[ "$t" -gt 1 ] && col=wall
	echo
	echo "$t thread(s): ours GOMAXPROCS=$t ($mode), OpenBLAS OPENBLAS_NUM_THREADS=$t; verdict on the $col ratio"
	printf '%-4s %-16s %7s %7s %9s %9s %6s %6s  %s\n' op "m x k x n" ours "ours" OpenBLAS OpenBLAS ratio ratio "target"
	printf '%-4s %-16s %7s %7s %9s %9s %6s %6s  %s\n' "" "" wall cpu wall cpu wall cpu "$col >= 1.00"
	local pass=0 total=0
	: >"$tmp/ratios.txt"
	while read -r op m k n blas blascpu; do
		path=$impl/$mode
		label=$op
		if [ "$op" = NTP ]; then
			# NT with the weights packed once: the decoder's path.
			op=NT path=packed
		fi
		ours=$(best GFLOPS "$op" "${m}k${k}n${n}" "$path")
		ourscpu=$(best cpu-GFLOPS "$op" "${m}k${k}n${n}" "$path")
		if [ -z "$ours" ] || [ -z "$ourscpu" ]; then
			echo "no Go result for $label $m x $k x $n" >&2
			return 1
		fi
		ratio=$(awk -v a="$ours" -v b="$blas" 'BEGIN { printf "%.2f", a / b }')
		ratiocpu=$(awk -v a="$ourscpu" -v b="$blascpu" 'BEGIN { printf "%.2f", a / b }')
		judged=$ratiocpu
		[ "$col" = wall ] && judged=$ratio
		verdict=$(awk -v r="$judged" 'BEGIN { print (r >= 1.0) ? "PASS" : "MISS" }')
		echo "$m $judged $label" >>"$tmp/ratios.txt"
		total=$((total + 1))
		[ "$verdict" = PASS ] && pass=$((pass + 1))
		printf '%-4s %-16s %7.1f %7.1f %9.1f %9.1f %6s %6s  %s\n' "$label" "${m}x${k}x${n}" "$ours" "$ourscpu" "$blas" "$blascpu" "$ratio" "$ratiocpu" "$verdict"
	done <"$tmp/blas.txt"
	median=$(awk '$3 != "NTP" { print $2 }' "$tmp/ratios.txt" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
	onerow=$(awk '$3 == "NTP" { print $2 }' "$tmp/ratios.txt" | sort -g | head -n1)
	echo "$t thread(s): $pass/$total shapes pass; OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0 2>/dev/null || echo "?"), ours the $impl kernel, best of runs"
	for line in "median shape:$median" "worst one-row decode shape (NTP):$onerow"; do
		verdict=$(awk -v r="${line#*:}" 'BEGIN { print (r >= 1.0) ? "PASS" : "MISS" }')
		echo "$t thread(s): ${line%%:*} ratio ${line#*:} ($col) >= 1.00: $verdict"
	done
}

# The machine is shared, so the two sides are measured alternately, shape by
# shape, and each keeps its best of several runs: load that comes and goes
# then hurts both alike.
status=0
for t in $threads; do
	mode=serial
	[ "$t" -gt 1 ] && mode=parallel
	: >"$tmp/blas.txt"
	: >"$tmp/go.txt"
	for op in $ops; do
		for s in $shapes; do
			IFS=x read -r m k n <<<"$s"
			OPENBLAS_NUM_THREADS=$t "$tmp/sgemm" "$budget" "$op" "$m" "$k" "$n" >>"$tmp/blas.txt"
			GOMAXPROCS=$t "$tmp/kernel.test" -test.run='^$' -test.bench="^BenchmarkMatMul/$op/m${m}k${k}n${n}/$impl/$mode\$" \
				-test.benchtime="$benchtime" -test.count="$count" >>"$tmp/go.txt"
			if [ "$op" = NT ] && [ "$m" = 1 ]; then
				OPENBLAS_NUM_THREADS=$t "$tmp/sgemm" "$budget" GEMV "$m" "$k" "$n" | sed 's/^GEMV /NTP /' >>"$tmp/blas.txt"
				GOMAXPROCS=$t "$tmp/kernel.test" -test.run='^$' -test.bench="^BenchmarkMatMul/NT/m${m}k${k}n${n}/packed\$" \
					-test.benchtime="$benchtime" -test.count="$count" >>"$tmp/go.txt"
			fi
		done
	done
	table "$t" "$mode" || status=1
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
