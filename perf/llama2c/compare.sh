#!/usr/bin/env bash
# compare.sh: check that llama2.c's run program and this module produce the
# same greedy continuation from the same weights. See README.md.
#
#   perf/llama2c/compare.sh LLAMA2C_DIR [-n STEPS] [-ckpt CHECKPOINT_DIR]
#
# LLAMA2C_DIR is a checkout of github.com/karpathy/llama2.c that you cloned
# yourself; this script only reads its run.c and builds it into a temporary
# directory. Without -ckpt it checks two seeded models (untied output with
# grouped key/value heads, and tied output with plain multi-head attention);
# with -ckpt it checks that checkpoint. Each model is checked on several
# prompts. Exit status 0 when every output matches.
set -euo pipefail

if [[ $# -lt 1 || ! -f "$1/run.c" ]]; then
	echo "usage: $0 LLAMA2C_DIR [-n STEPS] [-ckpt CHECKPOINT_DIR]  (LLAMA2C_DIR must hold run.c)" >&2
	exit 2
fi
l2c=$(cd "$1" && pwd)
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

echo "building run.c from $l2c (gcc -O3 -march=native)"
gcc -O3 -march=native -o "$work/run" "$l2c/run.c" -lm
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
		"$work/run" "$dir/model.bin" -z "$dir/tokenizer.bin" -t 0 -n "$steps" -i "$prompt" >"$work/run.txt" 2>"$work/run.err"
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
