#!/usr/bin/env bash
# run.sh: sampling speed of infer.Engine against llama2.c's run.c built with
# OpenMP (runomp) on the same exported weights, at equal thread counts. See
# README.md.
#
#   perf/sample/run.sh LLAMA2C_DIR [flags of the Go program, e.g. -reps 3 -procs 1,2]
#
# LLAMA2C_DIR is a checkout of github.com/karpathy/llama2.c that you cloned
# yourself; this script only reads its run.c and builds it into a temporary
# directory (never inside this repository).
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1/run.c" ]]; then
	echo "usage: $0 LLAMA2C_DIR [-reps N] [-procs 1,2] [-n STEPS] [-shapes a,b]  (LLAMA2C_DIR must hold run.c)" >&2
	exit 2
fi
l2c=$(cd "$1" && pwd)
shift

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# llama2.c's Makefile target runomp: its fastest single-file build.
echo "building $l2c/run.c: gcc -Ofast -fopenmp -march=native -o runomp run.c -lm ($(gcc --version | head -1))"
gcc -Ofast -fopenmp -march=native -o "$work/runomp" "$l2c/run.c" -lm
if [[ -d "$l2c/.git" ]]; then
	echo "llama2.c commit $(git -C "$l2c" rev-parse --short HEAD)"
fi
(cd "$repo" && go build -o "$work/sample" ./perf/sample)
"$work/sample" -run "$work/runomp" -work "$work/models" "$@"
