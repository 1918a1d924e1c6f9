#!/usr/bin/env bash
# Runs a command on a busy machine: N busy loops (default 6) share the
# cores with it, as on a laptop doing other work. It prints the load
# average every minute, and at the end the command's wall time and exit
# status, which it exits with. It runs the tests clean: GOFLAGS=-count=1
# keeps go test from answering from its cache.
#
# Usage: perf/busy/run.sh [-n N] -- COMMAND...
# Example, the README's test command at a load of about 8 on 2 cores:
#   perf/busy/run.sh -n 6 -- bash .ci/run
set -uo pipefail

n=6
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [-n N] -- COMMAND..." >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-n N] -- COMMAND..." >&2; exit 2; }

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT
for _ in $(seq "$n"); do
	( while :; do :; done ) &
	pids+=($!)
done
( while sleep 60; do echo "busy: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2; done ) &
pids+=($!)

echo "busy: $n busy loops on $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" >&2
start=$(date +%s)
GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1" "$@"
status=$?
echo "busy: exit $status after $(( $(date +%s) - start )) s; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit $status
