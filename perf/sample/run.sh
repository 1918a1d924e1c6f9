#!/usr/bin/env bash
# run.sh: sampling speed of infer.Engine against llama2.c's run.c built with
# OpenMP (runomp) on the same exported weights, at equal thread counts. See
# README.md.
#
#   perf/sample/run.sh RUNOMP [flags of the Go program, e.g. -reps 3 -procs 1,2]
#
# RUNOMP is llama2.c's runomp program, which you built yourself from a
# checkout of github.com/karpathy/llama2.c (its Makefile's runomp target).
# This repository builds no third-party code.
set -euo pipefail

if [[ $# -lt 1 || ! -x "$1" || -d "$1" ]]; then
	echo "usage: $0 RUNOMP [-reps N] [-procs 1,2] [-n STEPS] [-shapes a,b]  (RUNOMP: llama2.c's runomp program)" >&2
	exit 2
fi
runomp=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "reference: $runomp (sha256 $(sha256sum "$runomp" | cut -c1-16))"
(cd "$repo" && go build -o "$work/sample" ./perf/sample)
"$work/sample" -run "$runomp" -work "$work/models" "$@"
