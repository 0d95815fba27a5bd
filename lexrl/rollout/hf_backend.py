"""The `hf` rollout backend: transformers `generate` on the live LoRA model, in-process.

Kept apart from `backend` (the protocol) so that the env and data path, which speaks only the
protocol, does not import torch and transformers: `lexrl eval` reports a malformed dataset line
before paying for them.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lexrl.generation import Completion, Sampling
from lexrl.rollout.batching import MicroBatchedBackend


class HFBackend(MicroBatchedBackend):
    """transformers `generate` on the live (LoRA) model; concurrent requests share a batch."""

    needs_adapter_files = False
    shared_by_processes = False

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_batch_size: int = 64,
        batch_wait_ms: float = 2.0,
        deterministic: bool = True,
        ignore_eos: bool = False,
    ):
        super().__init__(max_batch_size, batch_wait_ms, deterministic)
        self.model = model
        self.tokenizer = tokenizer
        self.ignore_eos = ignore_eos
        """Sample every completion to `max_new_tokens`, past any end-of-sequence token, and keep
        all of it (`rollout.ignore_eos`)."""

    def load_adapter(self, adapter_dir: Path, version: int) -> None:
        self.use_adapter(version)

    def use_adapter(self, version: int, adapter_dir: Path | None = None) -> None:
        self.adapter_version = version

    @torch.no_grad()
    def generate_batch(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        """One padded `generate` call; log-probs are recomputed from the returned scores. A
        completion ends at its first end-of-sequence token (kept), or with `ignore_eos` runs to
        `max_new_tokens` past any it samples (the token is neither masked nor a stop)."""
        pad_id = self.tokenizer.pad_token_id
        eos_id = self.tokenizer.eos_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            attention_mask[row, width - len(prompt) :] = 1
        device = next(self.model.parameters()).device
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        greedy = sampling.temperature <= 0
        was_training = self.model.training
        self.model.eval()
        output = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            temperature=None if greedy else sampling.temperature,
            top_k=None,
            top_p=None,
            pad_token_id=pad_id,
            # None here overrides the model's generation_config: no stopping criterion on EOS.
            eos_token_id=None if self.ignore_eos else eos_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
        if was_training:
            self.model.train()
        generated = output.sequences[:, width:]
        step_logits = list(output.logits)
        del output
        # Raw logits / temperature is the distribution sampled from (no top-k / top-p here), and
        # the trainer recomputes exactly this quantity. One step at a time, each step's logits
        # dropped once used: stacking them would hold [B, T, V] float32 several times over
        # (3 GB per copy for 16 x 1,024 tokens of a 49k vocabulary).
        token_logprobs = torch.empty(generated.shape, dtype=torch.float32, device=device)
        for step in range(len(step_logits)):
            logits = step_logits[step].float()
            step_logits[step] = None
            if not greedy:
                logits = logits / sampling.temperature
            token_logprobs[:, step] = (
                torch.log_softmax(logits, dim=-1).gather(-1, generated[:, step, None]).squeeze(-1)
            )
        completions = []
        for row in range(len(prompts)):
            ids = generated[row].tolist()
            length = len(ids)
            if not self.ignore_eos and eos_id in ids:
                length = ids.index(eos_id) + 1
            completions.append(
                Completion(
                    ids[:length], token_logprobs[row, :length].tolist(), self.adapter_version
                )
            )
        return completions
