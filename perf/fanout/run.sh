#!/bin/sh
# Builds the stand-in and the fan-out benchmark and runs the whole
# comparison: the route strategy over the openai client against a bare
# net/http client, at 16, 64 and 512 rollouts in flight, against the
# stand-in at 50 ms in a separate process. Where the machine has two cores,
# the client runs on core 0 and the stand-in on core 1.
#
#   perf/fanout/run.sh                  # the full run
#   perf/fanout/run.sh -rounds 3        # fewer rollouts per C
#
# Extra arguments go to the fanout program (see fanout -h).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/standin" ./perf/standin
go build -o "$out/fanout" ./perf/fanout
if command -v taskset >/dev/null 2>&1 && [ -e /sys/devices/system/cpu/cpu1 ]; then
	exec_prefix="taskset -c 0"
	server_cpu=1
else
	exec_prefix=""
	server_cpu=-1
fi
$exec_prefix "$out/fanout" -standin "$out/standin" -server-cpu "$server_cpu" "$@"
