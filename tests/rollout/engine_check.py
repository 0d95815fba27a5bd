"""Run by test_vllm_engine.py in its own process (vLLM spawns its engine core, which needs the
`__main__` guard): samples through `VLLMEngineBackend` before and after loading an adapter and
prints, as JSON, the largest gap to the trainer's recomputed log-probs and the greedy samples."""

from __future__ import annotations

import asyncio
import json
import sys

import torch


def main(config_path: str, adapter_dir: str) -> None:
    from accelerate import Accelerator

    from lexrl.config import load_config
    from lexrl.rollout.backend import Sampling
    from lexrl.rollout.vllm_engine import VLLMEngineBackend
    from lexrl.train.advantages import Row
    from lexrl.train.learner import completion_logprobs, pack_rows
    from lexrl.train.trainer import build_policy

    config = load_config(config_path)
    env, policy, tokenizer, base_path = build_policy(config, Accelerator(cpu=True))
    backend = VLLMEngineBackend(base_path, config)
    prompts = []
    for task in env.tasks("test")[:4]:
        messages = [
            {"role": "system", "content": env.prompts["planner"]},
            {"role": "user", "content": task.inputs["query"]},
        ]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        prompts.append(ids if isinstance(ids, list) else ids["input_ids"])

    def sample(temperature: float) -> tuple[list, float]:
        async def run():
            sampling = Sampling(temperature=temperature, max_new_tokens=12)
            return await asyncio.gather(*(backend.generate(p, sampling) for p in prompts))

        completions = asyncio.run(run())
        rows = [
            Row(
                p,
                c.completion_ids,
                c.logprobs,
                0.0,
                temperature if temperature > 0 else 1.0,
                i,
                "planner",
            )
            for i, (p, c) in enumerate(zip(prompts, completions, strict=True))
        ]
        batch = pack_rows(rows, tokenizer.pad_token_id)
        with torch.no_grad():
            trainer = completion_logprobs(policy, batch)
        gap = ((trainer - batch["sampler_logprobs"]).abs() * batch["completion_mask"]).max()
        return completions, float(gap)

    result = {}
    sampled, result["gap_base"] = sample(0.8)
    greedy_base, _ = sample(0.0)
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.3)
    policy.save_pretrained(adapter_dir)
    backend.load_adapter(adapter_dir, version=3)
    sampled_after, result["gap_adapter"] = sample(0.8)
    greedy_after, _ = sample(0.0)
    result["versions"] = sorted({c.adapter_version for c in sampled + sampled_after})
    result["greedy_base"] = [c.completion_ids for c in greedy_base]
    result["greedy_adapter"] = [c.completion_ids for c in greedy_after]
    result["batches"] = backend.batches_run
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
