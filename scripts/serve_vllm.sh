#!/usr/bin/env bash
# Start one vLLM server per GPU for the config's base model (LoRA hot-loading on) and wait until
# every one is healthy. The trainer spreads requests over them:
#   rollout.vllm_urls: [http://127.0.0.1:8000, http://127.0.0.1:8001]
# Usage: bash scripts/serve_vllm.sh CONFIG [GPU ...]     (default GPUs: 6 7)
# Logs: runs/serve_gpu<N>.log. Stop them with: pkill -f "lexrl.cli serve"
set -euo pipefail
config="${1:?usage: serve_vllm.sh CONFIG [GPU ...]}"
shift
if [[ $# -gt 0 ]]; then gpus=("$@"); else gpus=(6 7); fi
mkdir -p runs
port=8000
urls=()
for gpu in "${gpus[@]}"; do
    CUDA_VISIBLE_DEVICES="$gpu" nohup python -m lexrl.cli serve "$config" --port "$port" \
        --rollout.vllm_gpu_memory_utilization 0.85 > "runs/serve_gpu${gpu}.log" 2>&1 &
    urls+=("http://127.0.0.1:${port}")
    port=$((port + 1))
done
for url in "${urls[@]}"; do
    until curl -sf "$url/health" > /dev/null; do
        if ! pgrep -f "lexrl.cli serve" > /dev/null; then
            echo "a server exited; see runs/serve_gpu*.log" >&2
            exit 1
        fi
        sleep 5
    done
    echo "healthy: $url"
done
joined=$(IFS=,; echo "${urls[*]}")
echo "train with: --rollout.backend vllm-server --rollout.vllm_urls \"[$joined]\""
