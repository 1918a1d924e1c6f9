#!/usr/bin/env bash
# Runs delegate's environment and trainer against Atropos's own trajectory
# API server: delegate process --push pushes scored groups into it, and
# delegate train --api trains on the batches it hands out.
#
#   perf/atropos/run.sh ATROPOS_DIR [STEPS]
#
# ATROPOS_DIR is a checkout of github.com/NousResearch/atropos you cloned
# yourself (nothing of it is copied into this repository). Its server needs
# FastAPI, uvicorn and pydantic: Debian's python3-fastapi and python3-uvicorn
# (pydantic 1.10) do, with a shim written below that maps the server's one
# pydantic-2 name (field_validator(mode="before")) to pydantic 1's
# validator(pre=True). Exit status 0 when the trainer finished every step.
set -euo pipefail
atropos=${1:?usage: perf/atropos/run.sh ATROPOS_DIR [STEPS]}
steps=${2:-3}
py=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

mkdir -p "$work/shim"
cat > "$work/shim/sitecustomize.py" <<'PY'
import pydantic

if not hasattr(pydantic, "field_validator"):
    def field_validator(*fields, mode="after", **kw):
        return pydantic.validator(*fields, pre=(mode == "before"), allow_reuse=True)

    pydantic.field_validator = field_validator
PY

go build -o "$work/delegate" ./cmd/delegate
port=${PORT:-8011}
PYTHONPATH="$work/shim:$atropos" "$py" -m uvicorn atroposlib.api.server:app \
  --host 127.0.0.1 --port "$port" > "$work/atropos.log" 2>&1 &
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/status" > /dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/status" > /dev/null || { cat "$work/atropos.log"; exit 1; }
echo "Atropos's server on 127.0.0.1:$port"

"$work/delegate" train --api "http://127.0.0.1:$port" --steps "$steps" --items 2 --group 4 \
  --out "$work/train" > "$work/train.log" 2>&1 &
trainer=$!
"$work/delegate" process --config examples/world.yaml --dataset world -n $((4 * steps)) -g 4 \
  --strategy route --temperature 1 --keep-ties --out "$work/env" --progress none \
  --push "http://127.0.0.1:$port" | grep '^groups'
wait $trainer
cat "$work/train.log"
test -f "$work/train/checkpoint/policy/config.json"
echo "PASS: delegate's environment and trainer ran $steps steps through Atropos's server"
