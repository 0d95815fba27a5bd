#!/usr/bin/env bash
# Serve a statute config's retrieval models (env.retrieval.dense_model and
# reranker_model) with vLLM, one GPU each, so that training processes share them instead of each
# loading them (two 4B models take 15 GiB: `lexrl plan CONFIG` shows it). Waits until both are
# healthy, then prints the overrides that point the trainer at them.
# Usage: bash scripts/serve_retrieval.sh CONFIG GPU_DENSE GPU_RERANKER
# Logs: runs/serve_retrieval_gpu<N>.log. Stop them with: pkill -f "runner pooling"
set -euo pipefail
config="${1:?usage: serve_retrieval.sh CONFIG GPU_DENSE GPU_RERANKER}"
gpu_dense="${2:?GPU for the dense model}"
gpu_reranker="${3:?GPU for the reranker}"
read -r dense reranker < <(python - "$config" <<'PY'
import sys

from lexrl.config import load_config

env = load_config(sys.argv[1], []).env
if env.name != "statute":
    sys.exit(f"{sys.argv[1]}: env.type is {env.name!r}; serve_retrieval.sh serves a statute config's models")
retrieval = env.retrieval
print(retrieval.dense_model or "-", retrieval.reranker_model or "-")
PY
)
mkdir -p runs
urls=()
start() {  # model gpu port
    # A 4B pooling model needs its weights (7.5 GiB) and about 1 GiB of vLLM's own buffers.
    CUDA_VISIBLE_DEVICES="$2" nohup python -m vllm.entrypoints.openai.api_server --model "$1" \
        --runner pooling --port "$3" --gpu-memory-utilization 0.45 \
        > "runs/serve_retrieval_gpu$2.log" 2>&1 &
    urls+=("http://127.0.0.1:$3")
}
overrides=()
if [[ "$dense" != "-" ]]; then
    start "$dense" "$gpu_dense" 8100
    overrides+=(--env.retrieval.dense_endpoint http://127.0.0.1:8100/v1)
fi
if [[ "$reranker" != "-" ]]; then
    start "$reranker" "$gpu_reranker" 8101
    overrides+=(--env.retrieval.reranker_endpoint http://127.0.0.1:8101/v1)
fi
for url in "${urls[@]}"; do
    until curl -sf "$url/health" > /dev/null; do
        if ! pgrep -f "runner pooling" > /dev/null; then
            echo "a retrieval server exited; see runs/serve_retrieval_gpu*.log" >&2
            exit 1
        fi
        sleep 5
    done
    echo "healthy: $url" >&2
done
echo "${overrides[@]}"
