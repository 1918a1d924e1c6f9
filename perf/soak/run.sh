#!/bin/sh
# Builds delegate and the soak program and runs the fault soak of
# `delegate process` (see README.md):
#
#   perf/soak/run.sh                      # 10 minutes
#   perf/soak/run.sh -duration 4m         # shorter
#
# Extra arguments go to the soak program (see soak -h). The working
# directory (dataset, config, outputs, logs, report.json) is kept and
# printed; SOAK_WORK chooses it.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${SOAK_WORK:-$(mktemp -d /tmp/delegate-soak.XXXXXX)}
mkdir -p "$work"
cd "$root"
go build -o "$work/delegate" ./cmd/delegate
go build -o "$work/soak" ./perf/soak
echo "soak: working in $work"
exec "$work/soak" -delegate "$work/delegate" -work "$work" "$@"
