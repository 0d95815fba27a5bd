"""The update half of GRPO: rows -> micro-batched forward/backward of the LoRA policy -> step.

The learner is algorithm-blind about where rows came from: it gets Rows (prompt ids, completion
ids, sampler log-probs, advantage) and the global counts, computes the trainer's log-probs on the
completion tokens only, and applies `policy_loss`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext

import torch
from accelerate import Accelerator
from peft import PeftModel
from transformers import get_cosine_schedule_with_warmup

from lexrl.config import GRPOConfig
from lexrl.train.advantages import Row
from lexrl.train.loss import LossInputs, Totals, importance_weights, policy_loss


def pack_rows(rows: Sequence[Row], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-pad prompts and right-pad completions so every completion starts at column P.

    Returns input_ids / attention_mask / position_ids [B, P + T], completion_mask,
    sampler_logprobs [B, T], advantages and temperatures [B]; T = longest completion.
    """
    prompt_width = max(len(r.prompt_ids) for r in rows)
    completion_width = max(len(r.completion_ids) for r in rows)
    batch = len(rows)
    input_ids = torch.full((batch, prompt_width + completion_width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    completion_mask = torch.zeros(batch, completion_width)
    sampler_logprobs = torch.zeros(batch, completion_width)
    for i, row in enumerate(rows):
        start = prompt_width - len(row.prompt_ids)
        end = prompt_width + len(row.completion_ids)
        input_ids[i, start:end] = torch.tensor(row.prompt_ids + row.completion_ids)
        attention_mask[i, start:end] = 1
        completion_mask[i, : len(row.completion_ids)] = 1
        sampler_logprobs[i, : len(row.completion_ids)] = torch.tensor(row.sampler_logprobs)
    # Positions count real tokens only, as generation does for a left-padded batch.
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "completion_mask": completion_mask,
        "sampler_logprobs": sampler_logprobs,
        "advantages": torch.tensor([r.advantage for r in rows]),
        "temperatures": torch.tensor([r.temperature for r in rows]),
    }


def completion_logprobs(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, T] log-probs of the completion tokens under `model` at each row's temperature."""
    completion_width = batch["completion_mask"].shape[1]
    # Only the positions that predict completion tokens are projected to the vocabulary.
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=completion_width + 1,
    ).logits[:, :-1]
    logits = logits.float() / batch["temperatures"].view(-1, 1, 1)
    targets = batch["input_ids"][:, -completion_width:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def global_totals(rows: Sequence[Row], accelerator: Accelerator) -> Totals:
    counts = torch.tensor(
        [
            len({r.trajectory for r in rows}),
            len(rows),
            sum(len(r.completion_ids) for r in rows),
            max((len(r.completion_ids) for r in rows), default=0),
        ],
        dtype=torch.long,
    )
    if accelerator.num_processes > 1:
        per_process = accelerator.gather(counts.unsqueeze(0))  # [world, 4]
        counts = torch.cat([per_process[:, :3].sum(dim=0), per_process[:, 3:].max(dim=0).values])
    trajectories, num_rows, tokens, longest = (int(c) for c in counts)
    return Totals(max(trajectories, 1), max(num_rows, 1), max(tokens, 1), max(longest, 1))


class Learner:
    def __init__(
        self,
        model: PeftModel,
        config: GRPOConfig,
        max_steps: int,
        accelerator: Accelerator,
        pad_id: int,
        importance_sampling: str = "none",
    ):
        """`importance_sampling`: a mode of `importance_weights` (`auto` already resolved)."""
        self.config = config
        self.accelerator = accelerator
        self.pad_id = pad_id
        self.importance_sampling = importance_sampling
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            trainable, lr=config.learning_rate, weight_decay=config.weight_decay
        )
        total_updates = max(1, max_steps * config.updates_per_batch)
        scheduler = get_cosine_schedule_with_warmup(optimizer, config.warmup_steps, total_updates)
        self.model, self.optimizer, self.scheduler = accelerator.prepare(
            model, optimizer, scheduler
        )

    @property
    def policy(self) -> PeftModel:
        return self.accelerator.unwrap_model(self.model)

    def update(self, rows: Sequence[Row]) -> dict[str, float]:
        """One optimizer step (per `updates_per_batch`) over `rows`, this process's share."""
        totals = global_totals(rows, self.accelerator)
        chunks = [
            rows[i : i + self.config.micro_batch_size]
            for i in range(0, len(rows), self.config.micro_batch_size)
        ]
        old = self._old_logprobs(chunks) if self.importance_sampling != "none" else None
        metrics: dict[str, float] = {}
        for _ in range(self.config.updates_per_batch):
            metrics = self._step(chunks, totals, old)
        return metrics

    @torch.no_grad()
    def _old_logprobs(self, chunks: Sequence[Sequence[Row]]) -> list[torch.Tensor]:
        """The trainer's log-probs of every chunk before the update (pi_old)."""
        self.model.eval()
        return [completion_logprobs(self.model, pack_rows(c, self.pad_id)) for c in chunks]

    def _step(
        self,
        chunks: Sequence[Sequence[Row]],
        totals: Totals,
        old_chunks: list[torch.Tensor] | None,
    ) -> dict[str, float]:
        config = self.config
        self.model.train()
        sums = {
            "loss": 0.0,
            "tokens": 0.0,
            "clip_fraction": 0.0,
            "kl": 0.0,
            "sampler_logprob_diff": 0.0,
        }
        mismatch: dict[str, float] = {}
        if not chunks:
            # DDP still needs this process in the gradient all-reduce.
            dummy = sum(p.sum() * 0.0 for p in self.model.parameters() if p.requires_grad)
            self.accelerator.backward(dummy)
        for index, chunk in enumerate(chunks):
            batch = pack_rows(chunk, self.pad_id)
            last = index == len(chunks) - 1
            with self.accelerator.no_sync(self.model) if not last else nullcontext():
                logprobs = completion_logprobs(self.model, batch)
                ref = None
                if config.beta > 0:
                    with torch.no_grad(), self.policy.disable_adapter():
                        ref = completion_logprobs(self.model, batch)
                old, weights = None, None
                if old_chunks is not None:
                    old = old_chunks[index]
                    weights, chunk_mismatch = importance_weights(
                        old,
                        batch["sampler_logprobs"],
                        batch["completion_mask"],
                        self.importance_sampling,
                        config.importance_sampling_cap,
                    )
                    share = float(batch["completion_mask"].sum())
                    for key, value in chunk_mismatch.items():
                        mismatch[key] = mismatch.get(key, 0.0) + value * share
                loss, step_metrics = policy_loss(
                    LossInputs(
                        logprobs,
                        batch["sampler_logprobs"],
                        batch["advantages"],
                        batch["completion_mask"],
                        ref,
                        old,
                        weights,
                    ),
                    totals,
                    loss_type=config.loss,
                    epsilon=config.epsilon,
                    epsilon_high=config.epsilon_high,
                    beta=config.beta,
                )
                # DDP averages gradients over processes; the loss is already a share of the
                # global sum, so undo the average.
                self.accelerator.backward(loss * self.accelerator.num_processes)
            sums["loss"] += loss.item()
            for key in ("clip_fraction", "kl", "sampler_logprob_diff"):
                sums[key] += step_metrics[key] * step_metrics["tokens"]
            sums["tokens"] += step_metrics["tokens"]
        grad_norm = self.accelerator.clip_grad_norm_(
            [p for p in self.model.parameters() if p.requires_grad], self.config.max_grad_norm
        )
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        tokens = max(sums["tokens"], 1.0)
        return {
            **{key: value / tokens for key, value in mismatch.items()},
            "loss/policy": sums["loss"],
            "loss/clip_fraction": sums["clip_fraction"] / tokens,
            "loss/kl": sums["kl"] / tokens,
            "loss/sampler_logprob_diff": sums["sampler_logprob_diff"] / tokens,
            "loss/grad_norm": float(grad_norm),
            "loss/learning_rate": self.scheduler.get_last_lr()[0],
        }
