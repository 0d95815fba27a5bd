#!/usr/bin/env bash
# LegalMALR's GRPO run on one 8 x RTX 4090 machine (configs/stard_mas_grpo.yaml), in the three
# layouts `lexrl plan configs/stard_mas_grpo.yaml --gpus 8 --gpu-memory 24` plans:
#   bash scripts/train_8x4090.sh server      # GPUs 0-3 train, 4-5 serve the policy (vLLM)
#   bash scripts/train_8x4090.sh colocate    # GPUs 0-5 train, a vLLM engine colocated in each
#   bash scripts/train_8x4090.sh zero2       # as colocate, under DeepSpeed ZeRO-2 (pip install -e ".[deepspeed]")
# In every layout GPUs 6 and 7 serve the retrieval models (Qwen3-Embedding-4B, Qwen3-Reranker-4B;
# scripts/serve_retrieval.sh): 15 GiB of weights do not fit beside a trainer on a 24 GB card.
# Extra arguments go to `lexrl train` (e.g. --run.resume true).
# Before the first run: bash scripts/prepare_stard.sh && lexrl index configs/stard_mas_grpo.yaml
set -euo pipefail
# On SIGTERM the launcher gives its workers this long to finish the step and checkpoint before
# SIGKILL (torch elastic's default is 30 s, shorter than a step here; docs/faults.md).
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT="${TORCH_ELASTIC_SHUTDOWN_TIMEOUT:-600}"
mode="${1:?usage: train_8x4090.sh server|colocate|zero2 [overrides ...]}"
shift
config=configs/stard_mas_grpo.yaml
case "$mode" in server | colocate | zero2) ;; *)
    echo "unknown mode $mode (server, colocate or zero2)" >&2
    exit 2
    ;;
esac
read -ra retrieval <<< "$(bash scripts/serve_retrieval.sh "$config" 6 7)"
case "$mode" in
    server)
        bash scripts/serve_vllm.sh "$config" 4 5
        # The paper's G = 2, K = 8 over 4 processes: each task's 8 trajectories on 2 of them.
        accelerate launch --config_file configs/accelerate/train_6gpu.yaml \
            --num_processes 4 --gpu_ids 0,1,2,3 -m lexrl.cli train "$config" \
            --rollout.backend vllm-server \
            --rollout.vllm_urls "[http://127.0.0.1:8000,http://127.0.0.1:8001]" \
            "${retrieval[@]}" "$@"
        ;;
    colocate | zero2)
        # 6 processes cannot share G = 2 groups of K = 8 (8 is not a multiple of 3), so a step
        # takes G = 3: each task's 8 trajectories on 2 processes, 24 an update, 10 epochs = 4,114.
        # The engine's memory share comes from the plan (rollout.vllm_gpu_memory_utilization).
        accelerate_config=configs/accelerate/colocate_8gpu.yaml
        [[ "$mode" == zero2 ]] && accelerate_config=configs/accelerate/zero2_8gpu.yaml
        accelerate launch --config_file "$accelerate_config" \
            --num_processes 6 --gpu_ids 0,1,2,3,4,5 -m lexrl.cli train "$config" \
            --rollout.backend vllm-engine --grpo.tasks_per_step 3 --run.max_steps 4114 \
            "${retrieval[@]}" "$@"
        ;;
esac
