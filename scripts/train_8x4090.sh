#!/usr/bin/env bash
# LegalMALR's GRPO run on one 8 x RTX 4090 machine (configs/stard_mas_grpo.yaml).
#   bash scripts/train_8x4090.sh server      # (a) 6 training GPUs + 2 vLLM servers (GPUs 6, 7)
#   bash scripts/train_8x4090.sh colocate    # (b) 8 training GPUs, a vLLM engine in each
#   bash scripts/train_8x4090.sh zero2       # (b) under DeepSpeed ZeRO-2 (pip install -e ".[deepspeed]")
# Extra arguments go to `lexrl train` (e.g. --run.resume true).
# Before the first run: bash scripts/prepare_stard.sh && lexrl index configs/stard_mas_grpo.yaml
set -euo pipefail
# On SIGTERM the launcher gives its workers this long to finish the step and checkpoint before
# SIGKILL (torch elastic's default is 30 s, shorter than a step here; docs/faults.md).
export TORCH_ELASTIC_SHUTDOWN_TIMEOUT="${TORCH_ELASTIC_SHUTDOWN_TIMEOUT:-600}"
mode="${1:?usage: train_8x4090.sh server|colocate|zero2 [overrides ...]}"
shift
config=configs/stard_mas_grpo.yaml
case "$mode" in
    server)
        bash scripts/serve_vllm.sh "$config" 6 7
        # 6 processes cannot share G = 2 groups of K = 8 evenly (8 is not a multiple of 3), so
        # each process takes a whole task: G = 6, 48 trajectories an update; 10 epochs = 2,057.
        accelerate launch --config_file configs/accelerate/train_6gpu.yaml -m lexrl.cli train "$config" \
            --rollout.backend vllm-server \
            --rollout.vllm_urls "[http://127.0.0.1:8000,http://127.0.0.1:8001]" \
            --grpo.tasks_per_step 6 --run.max_steps 2057 "$@"
        ;;
    colocate)
        # The paper's G = 2, K = 8: each task's 8 trajectories are split over 4 processes (2 each),
        # advantages over the whole group; 10 epochs = 6,170 updates (configs/stard_mas_grpo.yaml).
        accelerate launch --config_file configs/accelerate/colocate_8gpu.yaml -m lexrl.cli train "$config" \
            --rollout.backend vllm-engine --rollout.vllm_gpu_memory_utilization 0.35 "$@"
        ;;
    zero2)
        # As colocate, with the LoRA's optimizer state, fp32 master weights and gradients
        # partitioned over the 8 GPUs (configs/deepspeed/zero2.json; lexrl fills its "auto" keys).
        accelerate launch --config_file configs/accelerate/zero2_8gpu.yaml -m lexrl.cli train "$config" \
            --rollout.backend vllm-engine --rollout.vllm_gpu_memory_utilization 0.35 "$@"
        ;;
    *)
        echo "unknown mode $mode (server, colocate or zero2)" >&2
        exit 2
        ;;
esac
