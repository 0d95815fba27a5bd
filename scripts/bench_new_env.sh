#!/usr/bin/env bash
# Seconds from `lexrl new-env` to an evaluated checkpoint of its default run, step by step, in a
# throwaway folder: the scaffold as written (its toy tasks), installed into a folder of its own
# on PYTHONPATH so this environment is left as it was.
#
#     bash scripts/bench_new_env.sh [NAME]
#
# Prints one line per step, the total, and the files the steps wrote outside the package
# (there should be none).
set -euo pipefail

name="${1:-limitation}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled HF_HUB_OFFLINE=1
python="${PYTHON:-python}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
before="$(git -C "$repo" status --porcelain 2>/dev/null || true)"
total=0

step() {
    local label="$1"
    shift
    local start end
    start="$EPOCHREALTIME"
    "$@" >"$work/$label.log" 2>&1 || { echo "$label failed:"; tail -20 "$work/$label.log"; exit 1; }
    end="$EPOCHREALTIME"
    total="$(awk -v t="$total" -v a="$start" -v b="$end" 'BEGIN { print t + b - a }')"
    awk -v l="$label" -v a="$start" -v b="$end" 'BEGIN { printf "%-10s %6.1f s\n", l, b - a }'
}

cd "$work"
step new-env "$python" -m lexrl.cli new-env "$name" --roles clerk,judge
step install "$python" -m pip install -q --no-deps --no-build-isolation --target "$work/site" "./$name"
cd "$name"
step pytest "$python" -m pytest -q -p no:cacheprovider tests
step audit "$python" -m lexrl.cli audit "configs/${name}_cpu.yaml"
step train "$python" -m lexrl.cli train "configs/${name}_cpu.yaml"
last="$(ls -d "runs/${name}_cpu/checkpoints"/step-* | tail -n 1)"
step eval "$python" -m lexrl.cli eval "configs/${name}_cpu.yaml" --checkpoint "$last"
awk -v t="$total" 'BEGIN { printf "%-10s %6.1f s\n", "total", t }'
grep -E "^\| $name \|" "$work/audit.log" || true
after="$(git -C "$repo" status --porcelain 2>/dev/null || true)"
if [ "$before" = "$after" ]; then
    echo "files changed in lexrl: none"
else
    echo "files changed in lexrl:"
    diff <(echo "$before") <(echo "$after") || true
fi
