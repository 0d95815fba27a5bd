"""Run by test_vllm_engine.py in its own process (vLLM spawns its engine core, which needs the
`__main__` guard): samples through `VLLMEngineBackend` before and after loading an adapter and
prints, as JSON, the largest gap to the trainer's recomputed log-probs and the greedy samples."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

# Run as a script: the repository root makes `tests.rollout.vllm_fixtures` importable.
sys.path.insert(0, str(Path(__file__).parents[2]))


def main(config_path: str, adapter_dir: str) -> None:
    from accelerate import Accelerator

    from lexrl.config import load_config
    from lexrl.rollout.vllm_engine import VLLMEngineBackend
    from lexrl.train.base_model import build_policy
    from tests.rollout.vllm_fixtures import planner_prompts, sample_and_compare

    config = load_config(config_path)
    env, policy, tokenizer, base_path = build_policy(config, Accelerator(cpu=True))
    backend = VLLMEngineBackend(base_path, config)
    prompts = planner_prompts(env, tokenizer)

    result = {}
    sampled, result["gap_base"] = sample_and_compare(backend, policy, tokenizer, prompts)
    greedy_base, _ = sample_and_compare(backend, policy, tokenizer, prompts, temperature=0.0)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.3)
    policy.save_pretrained(adapter_dir)
    backend.load_adapter(adapter_dir, version=3)
    sampled_after, result["gap_adapter"] = sample_and_compare(backend, policy, tokenizer, prompts)
    greedy_after, _ = sample_and_compare(backend, policy, tokenizer, prompts, temperature=0.0)
    result["versions"] = sorted({c.adapter_version for c in sampled + sampled_after})
    result["greedy_base"] = [c.completion_ids for c in greedy_base]
    result["greedy_adapter"] = [c.completion_ids for c in greedy_after]
    result["batches"] = backend.batches_run
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
