#!/usr/bin/env bash
# Fill wheels/ (git-ignored) with what scripts/gpu_bench.sh installs on a lent GPU machine, which
# has no network and whose Python has torch, transformers, peft, accelerate, sentence-transformers
# and triton but none of lexrl's other dependencies.
#
#     scripts/build_gpu_wheels.sh [--check PYTHON]
#
# Run it on the CPU machine (it needs the package index), then carry the folder to the GPU:
# run(command="bash scripts/gpu_bench.sh", carry=["wheels"]). The device tool carries 64 MiB of
# ignored paths at most; the folder must stay under 60 MiB (it is about 0.5 MiB).
#
# The wheels (`pip wheel --no-deps`, every one pure Python):
# - lexrl itself, built from a copy of pyproject.toml, README.md and lexrl/;
# - the packages that importing lexrl.config, lexrl.models, lexrl.train.learner,
#   lexrl.train.plan, lexrl.train.plan_report and lexrl.train.advantages (what
#   scripts/gpu_bench.py imports; it rolls out no env) needs beyond the GPU image: draccus (the
#   config parser lexrl.config imports) and its imported dependencies mergedeep, typing-inspect
#   and mypy-extensions. pyyaml and typing-extensions come with transformers and torch; draccus'
#   toml is imported only to read .toml configs, which the benchmark does not.
#   Found by importing those modules in a venv with only torch, transformers, peft and accelerate
#   (what --check does): nothing else is missing.
# The versions are those of this checkout's .venv where it has them (else the newest).
# wheels/SOURCE_SHA256 records a hash of lexrl/ as built, so gpu_bench.sh can tell a stale wheel.
#
# --check PYTHON: afterwards install the wheels into PYTHON's environment (a venv imitating the
# GPU image: python3 -m venv /tmp/gpuimg && /tmp/gpuimg/bin/pip install torch==2.13.0
# 'transformers>=5.16,<5.20' peft accelerate) exactly as gpu_bench.sh does, and import the
# benchmark's modules there.
set -euo pipefail
cd "$(dirname "$0")/.."

check=""
if [[ "${1:-}" == "--check" ]]; then
    check="${2:?--check needs a python executable}"
fi

if [[ -x .venv/bin/python ]]; then
    PYTHON=${PYTHON:-.venv/bin/python}
else
    PYTHON=${PYTHON:-python3}
fi

DEPS=(draccus mergedeep typing-inspect mypy-extensions bm25s)
MAX_MIB=60

rm -rf wheels
mkdir -p wheels

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cp -r pyproject.toml README.md lexrl "$tmp/src/"
find "$tmp/src" -name __pycache__ -prune -exec rm -rf {} +
echo "== lexrl"
if "$PYTHON" -c "import setuptools, wheel" 2>/dev/null; then
    "$PYTHON" -m pip wheel -q --no-deps --no-build-isolation -w wheels "$tmp/src"
else
    "$PYTHON" -m pip wheel -q --no-deps -w wheels "$tmp/src"
fi

specs=()
for name in "${DEPS[@]}"; do
    version=$("$PYTHON" -c "import importlib.metadata as m, sys
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    pass" "$name")
    specs+=("$name${version:+==$version}")
done
echo "== ${specs[*]}"
"$PYTHON" -m pip wheel -q --no-deps -w wheels "${specs[@]}"

for wheel in wheels/*.whl; do
    case "$wheel" in
        *-none-any.whl) ;;
        *) echo "error: $wheel is not a pure-Python wheel" >&2; exit 1 ;;
    esac
done

# The same command in gpu_bench.sh.
find lexrl -type f -not -path '*/__pycache__/*' -not -name '*.pyc' | LC_ALL=C sort \
    | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1 > wheels/SOURCE_SHA256

echo "== wheels/"
ls -l wheels
kib=$(du -sk wheels | cut -f1)
echo "total: ${kib} KiB ($(( (kib + 1023) / 1024 )) MiB at most; the limit is ${MAX_MIB} MiB)"
if (( kib > MAX_MIB * 1024 )); then
    echo "error: wheels/ is over ${MAX_MIB} MiB" >&2
    exit 1
fi

if [[ -n "$check" ]]; then
    echo "== install into $check as gpu_bench.sh does, then import the benchmark's modules"
    "$check" -m pip install -q --no-index --find-links wheels --no-deps wheels/*.whl
    (cd "$tmp" && "$check" -c "
import lexrl, lexrl.config, lexrl.models, lexrl.train.learner, lexrl.train.plan
import lexrl.train.plan_report, lexrl.train.advantages
print('imported lexrl from', lexrl.__file__)")
fi
