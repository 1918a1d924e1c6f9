#!/usr/bin/env bash
# run.sh: decode speed of our engine against llama.cpp's on the same q8_0
# GGUF file, and the same greedy tokens from that file and from the Hugging
# Face files it came from. See README.md.
#
#   perf/llamacpp/run.sh LLAMA_CPP_DIR [-reps N] [-n TOKENS] [-threads 1,2] [-commit HASH] [-work DIR]
#
# LLAMA_CPP_DIR is a llama.cpp source tree that you got and built yourself:
# this script reads its gguf-py and runs its build/bin/llama-bench and
# build/bin/llama-simple. This repository builds no third-party code.
# -commit names the tree's commit when it is not a git checkout. -work keeps the checkpoint
# and the GGUF file in DIR and reuses them on the next run; without it they
# go to a temporary directory that is removed at the end.
set -euo pipefail

if [[ $# -lt 1 || ! -d "$1/gguf-py" || ! -x "$1/build/bin/llama-bench" || ! -x "$1/build/bin/llama-simple" ]]; then
	echo "usage: $0 LLAMA_CPP_DIR [-reps N] [-n TOKENS] [-threads 1,2] [-commit HASH] [-work DIR]  (LLAMA_CPP_DIR must hold gguf-py, build/bin/llama-bench and build/bin/llama-simple)" >&2
	exit 2
fi
llama=$(cd "$1" && pwd)
shift
reps=5
steps=32
threads=1,2
commit=""
work=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	-reps) reps="$2"; shift 2 ;;
	-n) steps="$2"; shift 2 ;;
	-threads) threads="$2"; shift 2 ;;
	-commit) commit="$2"; shift 2 ;;
	-work) mkdir -p "$2"; work=$(cd "$2" && pwd); shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done
if [[ -z "$commit" ]]; then
	commit=$(git -C "$llama" rev-parse HEAD 2>/dev/null || echo unknown)
fi
if [[ -z "$work" ]]; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 -c 'import numpy, sentencepiece' 2>/dev/null ||
	{ echo "run.sh: gguf-py needs Debian's python3-numpy and python3-sentencepiece" >&2; exit 2; }

bin="$llama/build/bin"

(cd "$repo" && nice -n 15 go build -o "$work/ours" ./perf/llamacpp)
if [[ ! -f "$work/hf/model.safetensors" ]]; then
	echo "run.sh: writing the seeded Qwen2.5-0.5B-shaped checkpoint to $work/hf"
	nice -n 15 "$work/ours" write -dir "$work/hf"
fi
gguf="$work/model-q8_0.gguf"
if [[ ! -f "$gguf" ]]; then
	echo "run.sh: converting it to $gguf with $llama/gguf-py"
	nice -n 15 /usr/bin/python3 "$repo/perf/llamacpp/make_gguf.py" "$llama" "$work/hf" "$gguf"
fi

cache="$llama/build/CMakeCache.txt"
if [[ -f "$cache" ]]; then
	cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache")
	echo "run.sh: llama.cpp commit $commit; $cc $("$cc" -dumpfullversion 2>/dev/null || echo '?'); $(grep -E '^(CMAKE_BUILD_TYPE|GGML_NATIVE|BUILD_SHARED_LIBS):' "$cache" | tr '\n' ' ')"
else
	echo "run.sh: llama.cpp commit $commit; no CMakeCache.txt to read the build from"
fi
echo "run.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n 15 "$work/ours" tokens -hf "$work/hf" -gguf "$gguf" -llama-simple "$bin/llama-simple" -n "$steps"
# The timed part runs at normal priority.
"$work/ours" bench -hf "$work/hf" -gguf "$gguf" -llama-bench "$bin/llama-bench" -threads "$threads" -n "$steps" -reps "$reps"
echo "run.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
