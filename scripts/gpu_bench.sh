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
# refuses), prints nvidia-smi and the versions, then runs scripts/gpu_bench.py: a random
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

if ! compgen -G "wheels/*.whl" > /dev/null; then
    echo "gpu_bench.sh: no wheels/*.whl here: run scripts/build_gpu_wheels.sh on the CPU machine" \
        "first and carry wheels/ (run(command=\"bash scripts/gpu_bench.sh\", carry=[\"wheels\"]))" >&2
    exit 2
fi

PYTHON=${PYTHON:-}
if [[ -z "$PYTHON" ]]; then
    for candidate in python python3; do
        if command -v "$candidate" > /dev/null && "$candidate" -c "import torch" 2> /dev/null; then
            PYTHON=$(command -v "$candidate")
            break
        fi
    done
fi
if [[ -z "$PYTHON" ]]; then
    echo "gpu_bench.sh: no python on PATH imports torch" >&2
    exit 2
fi

echo "== install lexrl from wheels/ ($PYTHON)"
ls wheels/*.whl
# --force-reinstall: a machine kept warm between calls may hold an older build of lexrl 0.1.0.
install=(-m pip install --no-index --find-links wheels --no-deps --force-reinstall)
if ! "$PYTHON" "${install[@]}" wheels/*.whl; then
    site=$(mktemp -d /tmp/lexrl-site.XXXXXX)
    echo "pip refused to install into the environment; installing into $site on PYTHONPATH"
    "$PYTHON" "${install[@]}" --target "$site" wheels/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi

# The same command in build_gpu_wheels.sh: a lexrl wheel built from other sources than this
# checkout's would measure other code, so the checkout's lexrl/ is put first on the path then.
tree=$(find lexrl -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | LC_ALL=C sort \
    | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1)
if [[ "$tree" != "$(cat wheels/SOURCE_SHA256 2> /dev/null)" ]]; then
    echo "WARNING: wheels/ was built from another lexrl/ than this checkout's (rerun" \
        "scripts/build_gpu_wheels.sh); measuring the checkout's lexrl/ through PYTHONPATH"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

echo "== nvidia-smi"
nvidia-smi || echo "(no nvidia-smi)"
echo "== versions"
# From another folder, so that lexrl is the installed one (or the PYTHONPATH one), as the
# benchmark sees it, not the checkout's by the current directory.
(cd / && "$PYTHON" - << 'EOF'
import sys

import accelerate
import peft
import torch
import transformers

import lexrl

print("python", sys.version.split()[0])
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).total_memory)
print("transformers", transformers.__version__, "peft", peft.__version__)
print("accelerate", accelerate.__version__, "lexrl from", lexrl.__file__)
EOF
)

echo "== benchmark"
"$PYTHON" scripts/gpu_bench.py --layers 36 --tokens 4x1500+200,1x1500+200 \
    --checkpointing on,off --micro-batch-tokens 8192 --shared-prefix off,on --deadline-s 480 "$@"
