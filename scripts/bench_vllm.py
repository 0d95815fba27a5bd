"""vLLM inside lexrl vs vLLM alone, and adapter sync vs reloading merged weights.

    python scripts/bench_vllm.py configs/demo_cpu.yaml [--prompts 64] [--max-tokens 48]

1. Generated tokens/s of `vllm.LLM.generate` on a fixed batch of prompts (the statute env's
   planner prompts), all in one call: vLLM alone.
2. Tokens/s of the same prompts sent as concurrent requests through lexrl's `vllm-engine`
   backend (asyncio + the micro-batcher + the Completion bookkeeping): the ratio of the two is
   lexrl's orchestration overhead. Both sample at temperature 0.8 with the same settings
   (log-probs on, as lexrl needs them); tokens/s counts the tokens each produced.
3. Adapter sync: save the LoRA adapter and hot-load it (`LoRARequest`, timed through the first
   generation that uses it) vs. merging it into the base, saving the full weights and starting
   a new engine on them (what a merge-based trainer does each step).
Run it on a quiet machine; it prints one JSON object. `--skip-reload` leaves out the new engine
of step 3 (its time is then null), the most a CPU spends: the CPU test runs it so, on the demo's
tiny model (tests/scripts/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--skip-reload", action="store_true", help="merge and save, but start no second engine"
    )
    args, overrides = parser.parse_known_args()  # the rest: --section.key value overrides

    from accelerate import Accelerator
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from lexrl.config import load_config
    from lexrl.generation import Sampling
    from lexrl.policy import render_prompt
    from lexrl.rollout.vllm_engine import VLLMEngineBackend
    from lexrl.train.trainer import build_policy

    config = load_config(args.config, overrides)
    config.rollout.backend = "vllm-engine"
    on_gpu = torch.cuda.is_available()
    env, policy, tokenizer, base_path = build_policy(config, Accelerator(cpu=not on_gpu))
    tasks = env.tasks("train")
    prompts = [
        render_prompt(tokenizer, env.prompts["planner"], tasks[i % len(tasks)].inputs["query"])
        for i in range(args.prompts)
    ]

    started = time.perf_counter()
    backend = VLLMEngineBackend(base_path, config)
    engine_start_s = time.perf_counter() - started
    llm: LLM = backend.llm
    # The same sampling settings lexrl's engine sends (log-probs included), so the ratio below
    # measures orchestration, not the cost of log-probs.
    params = SamplingParams(
        temperature=0.8, top_p=1.0, top_k=-1, min_p=0.0, max_tokens=args.max_tokens, logprobs=0
    )
    token_prompts = [TokensPrompt(prompt_token_ids=p) for p in prompts]
    for _ in range(2):  # warm-up: kernels, graphs, the sampler's log-prob path
        llm.generate(token_prompts, params, use_tqdm=False)

    started = time.perf_counter()
    outputs = llm.generate(token_prompts, params, use_tqdm=False)
    alone_s = time.perf_counter() - started
    alone_tokens = sum(len(o.outputs[0].token_ids) for o in outputs)

    async def through_lexrl(engine: VLLMEngineBackend) -> list:
        sampling = Sampling(temperature=0.8, max_new_tokens=args.max_tokens)
        return await asyncio.gather(*(engine.generate(p, sampling) for p in prompts))

    backend.batches_run = 0
    started = time.perf_counter()
    completions = asyncio.run(through_lexrl(backend))
    lexrl_s = time.perf_counter() - started
    lexrl_tokens = sum(len(c.completion_ids) for c in completions)
    lexrl_batches = backend.batches_run

    work = Path(tempfile.mkdtemp(prefix="bench_vllm_"))
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.02)
    one = [token_prompts[0]]
    short = SamplingParams(temperature=0.0, max_tokens=1)
    started = time.perf_counter()
    policy.save_pretrained(work / "adapter")
    backend.load_adapter(work / "adapter", version=1)
    llm.generate(one, short, lora_request=backend._lora, use_tqdm=False)
    adapter_sync_s = time.perf_counter() - started

    started = time.perf_counter()
    merged = policy.merge_and_unload()
    merged.save_pretrained(work / "merged")
    tokenizer.save_pretrained(work / "merged")
    merge_save_s = time.perf_counter() - started
    del backend, llm
    reload_s = None
    if not args.skip_reload:
        started = time.perf_counter()
        fresh = LLM(
            model=str(work / "merged"),
            dtype=config.model.dtype,
            max_model_len=config.rollout.vllm_max_model_len,
            gpu_memory_utilization=(config.rollout.vllm_gpu_memory_utilization or 0.5)
            if on_gpu
            else 0.5,
        )
        fresh.generate(one, short, use_tqdm=False)
        reload_s = round(time.perf_counter() - started, 1)
    shutil.rmtree(work, ignore_errors=True)

    device = torch.cuda.get_device_name(0) if on_gpu else f"CPU ({platform.machine()})"
    print(
        json.dumps(
            {
                "device": device,
                "model": config.model.name_or_path,
                "prompts": len(prompts),
                "max_tokens": args.max_tokens,
                "engine_start_s": round(engine_start_s, 1),
                "vllm_alone_tokens_per_s": round(alone_tokens / alone_s, 1),
                "lexrl_engine_tokens_per_s": round(lexrl_tokens / lexrl_s, 1),
                "lexrl_over_alone": round((lexrl_tokens / lexrl_s) / (alone_tokens / alone_s), 3),
                "lexrl_generate_batches": lexrl_batches,
                "adapter_sync_s": round(adapter_sync_s, 3),
                "merge_and_save_s": round(merge_save_s, 2),
                "new_engine_on_merged_weights_s": reload_s,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
