#!/usr/bin/env bash
# One statute update of a random Qwen3-4B (`hf` backend) on a lent GPU, measured against the
# plan: the one command a session with a GPU runs. Through the device tool, from the repository
# root, carrying the wheels that scripts/build_gpu_wheels.sh built on the CPU machine:
#
#     bash scripts/build_gpu_wheels.sh                 # here, on the CPU machine, first
#     run(command="bash scripts/gpu_bench.sh", carry=["wheels"], timeout_s=600)
#
# Extra arguments go to scripts/gpu_bench.py and override the defaults below, e.g.
# run(command="bash scripts/gpu_bench.sh --micro-batch-tokens 4096 --checkpointing on",
#     carry=["wheels"]).
#
# It installs lexrl and the few pure-Python packages the GPU image lacks from wheels/
# (`pip install --no-index --no-deps`; into a --target folder on PYTHONPATH if the image's pip
# refuses), prints nvidia-smi and the versions, runs scripts/padding_free_check.py (the CUDA
# path of grpo.padding_free against the padded rows; a failure is printed, and the benchmark
# still runs), then runs scripts/gpu_bench.py: a random
# Qwen3-4B (36 layers, bf16, sdpa attention) with LoRA r 16 on all 7 projections and lexrl's
# `Learner` (reinforce loss), one update over 16 trajectories x 4 trainable turns of 1,500 prompt
# + 200 completion tokens (64 rows), for micro-batch token caps 4,096 and 8,192, each without and
# with gradient checkpointing: 1 warm-up and 3 measured updates per configuration, each
# configuration in its own process. Per configuration it reports the update's peak
# torch.cuda.max_memory_allocated() above the memory before it, the model's own memory, seconds
# per update and tokens/s, beside lexrl.train.plan's update_memory (flash attention) for the
# largest micro-batch and update_seconds on the GPU it finds (H100 or H200); an OOM is a row
# ("OOM at update N"), not a failure. A Markdown table and one JSON line per configuration go to
# stdout, and to $OUT/gpu_bench.md and $OUT/gpu_bench.jsonl (the device tool returns them) with
# the whole log in $OUT/gpu_bench.log. --deadline-s 480 stops it in time for the tool's 600 s
# limit (about 5 minutes are expected on an H100), reporting what finished.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${OUT:-}" ]]; then
    mkdir -p "$OUT"
    exec > >(tee -a "$OUT/gpu_bench.log") 2>&1
fi

source scripts/gpu_setup.sh

echo "== padding-free check (FlexAttention's backward against the padded rows)"
"$PYTHON" scripts/padding_free_check.py --device cuda ||
    echo "padding_free_check.py failed: grpo.padding_free must not be measured as equal" >&2

echo "== benchmark"
"$PYTHON" scripts/gpu_bench.py --layers 36 --tokens 4x1500+200,1x1500+200 \
    --checkpointing on,off --micro-batch-tokens 8192 --shared-prefix off,on --deadline-s 480 "$@"
