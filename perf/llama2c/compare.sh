#!/usr/bin/env bash
# compare.sh: check that llama2.c's run program and this module produce the
# same greedy continuation from the same weights. See README.md.
#
#   perf/llama2c/compare.sh RUN [-n STEPS] [-ckpt CHECKPOINT_DIR]
#
# RUN is llama2.c's run program, which you built yourself from a checkout
# of github.com/karpathy/llama2.c (its Makefile's run target). This
# repository builds no third-party code. Without -ckpt it checks two seeded models (untied output with
# grouped key/value heads, and tied output with plain multi-head attention);
# with -ckpt it checks that checkpoint. Each model is checked on several
# prompts. Exit status 0 when every output matches.
set -euo pipefail

if [[ $# -lt 1 || ! -x "$1" || -d "$1" ]]; then
	echo "usage: $0 RUN [-n STEPS] [-ckpt CHECKPOINT_DIR]  (RUN: llama2.c's run program)" >&2
	exit 2
fi
run=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
steps=64
ckpt=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	-n) steps="$2"; shift 2 ;;
	-ckpt) ckpt=$(cd "$2" && pwd); shift 2 ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
done

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "reference: $run (sha256 $(sha256sum "$run" | cut -c1-16))"
(cd "$repo" && go build -o "$work/ours" ./perf/llama2c)

if [[ -n "$ckpt" ]]; then
	models=("ckpt:-ckpt $ckpt")
else
	models=("untied-gqa:-seed 1" "tied-mha:-seed 2 -tied -kv-heads 4")
fi
prompts=("Once upon a time" "" $'tab\there, <|end|> & \xc3\xa9')

fail=0
for m in "${models[@]}"; do
	name=${m%%:*}
	read -r -a flags <<<"${m#*:}"
	for prompt in "${prompts[@]}"; do
		dir="$work/$name"
		"$work/ours" -out "$dir" -n "$steps" -prompt "$prompt" "${flags[@]}" >"$work/ours.txt" 2>"$work/ours.err"
		"$run" "$dir/model.bin" -z "$dir/tokenizer.bin" -t 0 -n "$steps" -i "$prompt" >"$work/run.txt" 2>"$work/run.err"
		if cmp -s "$work/ours.txt" "$work/run.txt"; then
			echo "match     $name prompt=$(printf '%q' "$prompt") ($(wc -c <"$work/run.txt") bytes; $(grep 'smallest gap' "$work/ours.err"))"
		else
			fail=1
			echo "MISMATCH  $name prompt=$(printf '%q' "$prompt")"
			echo "--- ours:";  od -c "$work/ours.txt" | head -20
			echo "--- run.c:"; od -c "$work/run.txt" | head -20
			sed -n 1p "$work/ours.err"
		fi
	done
done
exit $fail
