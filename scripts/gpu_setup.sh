# Sourced by the scripts a lent GPU machine runs (gpu_bench.sh, gpu_train_check.sh) from the
# repository root: installs lexrl and the pure-Python packages the GPU image lacks from the
# wheels/ that scripts/build_gpu_wheels.sh built on the CPU machine (`pip install --no-index
# --no-deps`; into a --target folder on PYTHONPATH if the image's pip refuses), warns when those
# wheels were built from another lexrl/ than the checkout's (and then puts the checkout first on
# PYTHONPATH), and prints nvidia-smi and the versions. Sets PYTHON to an interpreter that
# imports torch.

if ! compgen -G "wheels/*.whl" > /dev/null; then
    echo "$(basename "$0"): no wheels/*.whl here: run scripts/build_gpu_wheels.sh on the CPU machine" \
        "first and carry wheels/ (run(command=\"bash scripts/$(basename "$0")\", carry=[\"wheels\"]))" >&2
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
    echo "$(basename "$0"): no python on PATH imports torch" >&2
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
