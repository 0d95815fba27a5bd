#!/usr/bin/env bash
# The first `lexrl train` on a lent GPU, as one prepared command: the statute demo trained,
# killed with SIGKILL after its first checkpoint and resumed, evaluated, and a Qwen3-4B-shaped
# run beside `lexrl plan` (scripts/gpu_train_check.py says what each check does). Through the
# device tool, from the repository root, carrying the wheels scripts/build_gpu_wheels.sh built:
#
#     bash scripts/build_gpu_wheels.sh               # here, on the CPU machine, first
#     run(command="bash scripts/gpu_train_check.sh", carry=["wheels"], timeout_s=540)
#
# About 8 minutes at most: --deadline-s 420 (override it after the command) skips any check that
# would start later. JSON lines go to stdout and $OUT/gpu_train_check.jsonl, every command's log
# to $OUT/logs/, the whole output to $OUT/gpu_train_check.log.
#
#     bash scripts/gpu_train_check.sh --cpu --out DIR   # tiny shapes on the CPU, no wheels: CI
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--cpu" ]]; then
    exec "${PYTHON:-python}" scripts/gpu_train_check.py "$@"
fi

if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT"
    exec > >(tee -a "$OUT/gpu_train_check.log") 2>&1
fi

source scripts/gpu_setup.sh

echo "== gpu_train_check"
"$PYTHON" scripts/gpu_train_check.py --deadline-s 420 "$@"
