"""The update half of GRPO: rows -> micro-batched forward/backward of the LoRA policy -> step.

The learner is algorithm-blind about where rows came from: it gets Rows (prompt ids, completion
ids, sampler log-probs, advantage) and the global counts, computes the trainer's log-probs on the
completion tokens only, and applies `policy_loss`.

It runs under plain DDP (`accelerate launch --multi_gpu`) or DeepSpeed ZeRO-2
(`configs/accelerate/zero2_8gpu.yaml`). A process's share of rows varies from step to step, so
every process runs the same number of micro-batches (the global maximum, padded with zero-loss
ones): ZeRO-2 reduces gradients in every backward, DDP in the last one, and DDP broadcasts buffers
in every forward of the wrapped model. Forwards without gradients (pi_old, the reference) go
through the unwrapped policy, so their number may differ between processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, InitProcessGroupKwargs
from peft import PeftModel
from torch.utils.checkpoint import checkpoint
from transformers import get_cosine_schedule_with_warmup

from lexrl.config import GRPOConfig
from lexrl.train import prefix_attention
from lexrl.train.advantages import Row
from lexrl.train.loss import (
    MISMATCH_METRICS,
    LossInputs,
    Totals,
    importance_weights,
    policy_loss,
)
from lexrl.train.padding_free import pack_padding_free, split_padding_free_micro_batches
from lexrl.train.shared_prefix import pack_shared, split_shared_micro_batches


def make_accelerator() -> Accelerator:
    """The run's Accelerator: the GPUs when there are any, else the CPU.

    `cpu=True` would switch DeepSpeed off, so a DeepSpeed launch (its CPU accelerator in the
    tests) leaves the device to DeepSpeed.
    """
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true"
    if torch.cuda.is_available() or not deepspeed:
        return Accelerator(cpu=not torch.cuda.is_available())
    # Accelerate picks no process-group backend for DeepSpeed without CUDA and would count one
    # process; naming gloo (what DeepSpeed's CPU accelerator uses) makes it count them all.
    return Accelerator(kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])


def uses_deepspeed(accelerator: Accelerator) -> bool:
    return accelerator.distributed_type == DistributedType.DEEPSPEED


def sum_over_processes(sums: dict[str, float], accelerator: Accelerator) -> dict[str, float]:
    """Each value summed over all processes (one all-reduce)."""
    if accelerator.num_processes == 1:
        return sums
    values = torch.tensor(list(sums.values()), dtype=torch.float64, device=accelerator.device)
    return dict(zip(sums, accelerator.reduce(values, reduction="sum").tolist(), strict=True))


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


def completion_logprobs(
    model: torch.nn.Module, batch: dict[str, torch.Tensor], chunk_tokens: int = 512
) -> torch.Tensor:
    """[B, T] log-probs of the completion tokens under `model` at each row's temperature.

    `batch` is `pack_rows`' layout, `shared_prefix.pack_shared`'s (packs of rows sharing a
    prompt prefix, with segment ids for the attention mask and `hidden_index` / `targets`
    locating each completion token) or `padding_free.pack_padding_free`'s (those packs, or rows,
    end to end in one sequence, with pack ids); the values are the same.
    The decoder runs once; its final hidden states at the B x T positions that predict
    completion tokens are projected to the vocabulary `chunk_tokens` positions at a time. With
    gradients on, each chunk is checkpointed: its [chunk, V] float32 logits are recomputed in the
    backward instead of kept, so the vocabulary projection never holds more than one chunk.
    Every position's log-softmax is the same computation as one over the whole batch.
    """
    rows, completion_width = batch["completion_mask"].shape
    decoder, head = _decoder_and_head(model)
    if "segment_ids" in batch:
        # The model's attention learns the packed layout (idempotent; other forwards unchanged).
        prefix_attention.enable(decoder.config)
        if "pack_ids" in batch:
            layout = prefix_attention.FlatLayout.from_ids(batch["pack_ids"], batch["segment_ids"])
        else:
            layout = prefix_attention.PackLayout.from_segments(batch["segment_ids"])
        attention_mask = prefix_attention.as_attention_mask(layout, decoder.config)
    else:
        attention_mask = batch["attention_mask"]
    captured: list[torch.Tensor] = []
    hook = decoder.register_forward_hook(lambda _m, _i, out: captured.append(out[0]))
    last = torch.tensor([batch["input_ids"].shape[1] - 1], device=batch["input_ids"].device)
    try:
        # The model's own logits are cut to one position (an index, not a slice: a strided
        # slice makes the CPU's bf16 matmul convert the whole vocabulary matrix, 1.5 GB for
        # Qwen3); the projection that matters happens below, in chunks. The forward still goes
        # through `model` itself, so DDP and DeepSpeed see it.
        model(
            input_ids=batch["input_ids"],
            attention_mask=attention_mask,
            position_ids=batch["position_ids"],
            logits_to_keep=last,
        )
    finally:
        hook.remove()
    if "hidden_index" in batch:
        # [B * T, H]: the packed positions that predict each row's completion tokens.
        hidden = captured[0].flatten(0, 1)[batch["hidden_index"].flatten()]
        targets = batch["targets"].flatten()
    else:
        # [B * T, H], contiguous for the same reason; row-major, so position i is row i // T.
        hidden = captured[0][:, -completion_width - 1 : -1].reshape(rows * completion_width, -1)
        targets = batch["input_ids"][:, -completion_width:].reshape(-1)
    temperatures = batch["temperatures"].to(hidden.device).repeat_interleave(completion_width)
    pieces = []
    for start in range(0, rows * completion_width, max(1, chunk_tokens)):
        chunk = slice(start, start + max(1, chunk_tokens))
        args = (hidden[chunk], targets[chunk], temperatures[chunk].unsqueeze(1))
        if torch.is_grad_enabled():
            pieces.append(checkpoint(_chunk_logprobs, head, *args, use_reentrant=False))
        else:
            pieces.append(_chunk_logprobs(head, *args))
    return torch.cat(pieces).view(rows, completion_width)


def _chunk_logprobs(
    head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperatures: torch.Tensor
) -> torch.Tensor:
    """hidden [N, H], targets [N], temperatures [N, 1] -> [N] log-probs."""
    logits = head(hidden).float() / temperatures
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _decoder_and_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The decoder stack (its output: final, normed hidden states) and the vocabulary projection
    of a causal LM, seen through DDP / DeepSpeed (`.module`) and peft wrappers."""
    inner = getattr(model, "module", model)
    if isinstance(inner, PeftModel):
        inner = inner.get_base_model()
    if getattr(inner.config, "final_logit_softcapping", None):
        raise ValueError(
            f"{type(inner).__name__} soft-caps its logits after the vocabulary projection, which "
            "lexrl's chunked log-probs do not reproduce"
        )
    return inner.get_decoder(), inner.get_output_embeddings()


def compile_decoder_layers(model: torch.nn.Module) -> int:
    """Give each of the decoder's layers a `torch.compile`d forward (dynamic shapes) that runs
    when gradients are on, i.e. in the update's forward and backward; returns how many layers.

    Without gradients (the `hf` backend's generation, the old and reference log-probs) the layer
    runs eagerly: a decode step's KV cache makes dynamo recompile at every step until its limit
    (8), for no gain (docs/benchmarks.md, "Compiled decoder layers"). The layer module itself
    stays as it is, so checkpointing, peft and a DDP or DeepSpeed wrapper added later work
    around it."""
    layers = _decoder_and_head(model)[0].layers
    for layer in layers:
        layer.forward = _compiled_when_training(layer.forward)
    return len(layers)


def _compiled_when_training(eager: Callable[..., Any]) -> Callable[..., Any]:
    compiled = torch.compile(eager, dynamic=True)

    def forward(*args: Any, **kwargs: Any) -> Any:
        return (compiled if torch.is_grad_enabled() else eager)(*args, **kwargs)

    return forward


def split_micro_batches(
    rows: Sequence[Row], max_rows: int, max_tokens: int | None = None
) -> list[list[Row]]:
    """The step's rows cut into micro-batches: `max_rows` at a time in rollout order, or, with
    `max_tokens`, sorted by length and cut greedily so that no micro-batch's padded size
    (rows x (longest prompt + longest completion), as `pack_rows` lays it out) exceeds
    `max_tokens`; a row longer than that goes alone. Sorting puts rows of like length together,
    which cuts padding."""
    if max_tokens is None:
        return [list(rows[i : i + max_rows]) for i in range(0, len(rows), max_rows)]
    ordered = sorted(rows, key=lambda r: (len(r.prompt_ids) + len(r.completion_ids), r.trajectory))
    batches: list[list[Row]] = []
    current: list[Row] = []
    prompt_width = completion_width = 0
    for row in ordered:
        widths = (
            max(prompt_width, len(row.prompt_ids)),
            max(completion_width, len(row.completion_ids)),
        )
        if current and (len(current) + 1) * sum(widths) > max_tokens:
            batches.append(current)
            current, widths = [], (len(row.prompt_ids), len(row.completion_ids))
        current.append(row)
        prompt_width, completion_width = widths
    if current:
        batches.append(current)
    return batches


def zero_loss_batch(pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """A one-token batch whose forward makes every LoRA weight take part in the backward."""
    one = torch.ones(1, 1, dtype=torch.long, device=device)
    return {"input_ids": one * pad_id, "attention_mask": one, "position_ids": one * 0}


def global_totals(
    rows: Sequence[Row], micro_batches: int, accelerator: Accelerator
) -> tuple[Totals, int]:
    """The step's `Totals` over all processes, and the most micro-batches any process has."""
    counts = torch.tensor(
        [
            len({r.trajectory for r in rows}),
            len(rows),
            sum(len(r.completion_ids) for r in rows),
            max((len(r.completion_ids) for r in rows), default=0),
            micro_batches,
        ],
        dtype=torch.long,
        device=accelerator.device,
    )
    if accelerator.num_processes > 1:
        per_process = accelerator.gather(counts.unsqueeze(0))  # [world, 5]
        counts = torch.cat([per_process[:, :3].sum(dim=0), per_process[:, 3:].max(dim=0).values])
    trajectories, num_rows, tokens, longest, most = (int(c) for c in counts)
    totals = Totals(max(trajectories, 1), max(num_rows, 1), max(tokens, 1), max(longest, 1))
    return totals, max(most, 1)


def fill_deepspeed_config(ds_config: dict, config: GRPOConfig, num_processes: int) -> None:
    """Set the DeepSpeed keys lexrl owns from `grpo` ("auto" in configs/deepspeed/zero2.json).

    The learner decides where an optimizer step ends (one per update, whatever the number of
    micro-batches), so DeepSpeed's own gradient accumulation must stay at 1.
    """
    owned = {
        "gradient_clipping": config.max_grad_norm,
        "train_micro_batch_size_per_gpu": config.micro_batch_size,
        "gradient_accumulation_steps": 1,
        "train_batch_size": config.micro_batch_size * num_processes,
    }
    for key, value in owned.items():
        current = ds_config.get(key, "auto")
        if current == "auto":
            ds_config[key] = value
        elif current != value:
            raise ValueError(
                f"DeepSpeed config sets {key} = {current!r} but lexrl needs {value!r} (from "
                "grpo.max_grad_norm, grpo.micro_batch_size and one optimizer step per update): "
                'set it to "auto" in the DeepSpeed JSON'
            )


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
        self.deepspeed = uses_deepspeed(accelerator)
        if self.deepspeed:
            fill_deepspeed_config(
                accelerator.state.deepspeed_plugin.deepspeed_config,
                config,
                accelerator.num_processes,
            )
        if config.gradient_checkpointing:
            # Non-reentrant: the frozen base's inputs need no requires_grad trick, and the
            # chunked log-probs' own checkpoints nest inside it.
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        if config.compile_layers:
            compile_decoder_layers(model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(
            trainable, lr=config.learning_rate, weight_decay=config.weight_decay
        )
        total_updates = max(1, max_steps * config.updates_per_batch)
        # Not given to `prepare`: accelerate would step it once per process per optimizer step.
        self.scheduler = get_cosine_schedule_with_warmup(
            optimizer, config.warmup_steps, total_updates
        )
        self.model, self.optimizer = accelerator.prepare(model, optimizer)

    @property
    def policy(self) -> PeftModel:
        return self.accelerator.unwrap_model(self.model)

    def update(self, rows: Sequence[Row]) -> dict[str, float]:
        """One optimizer step (per `updates_per_batch`) over `rows`, this process's share."""
        chunks = self._split(rows)
        totals, micro_batches = global_totals(rows, len(chunks), self.accelerator)
        old = self._old_logprobs(chunks) if self.importance_sampling != "none" else None
        metrics: dict[str, float] = {}
        for _ in range(self.config.updates_per_batch):
            metrics = self._step(chunks, micro_batches, totals, old)
        return metrics

    def _logprobs(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return completion_logprobs(model, batch, self.config.logprob_chunk_tokens)

    def _split(self, rows: Sequence[Row]) -> list[list[Row]]:
        config = self.config
        if config.padding_free:
            return split_padding_free_micro_batches(
                rows, config.micro_batch_size, config.micro_batch_tokens, config.shared_prefix
            )
        split = split_shared_micro_batches if config.shared_prefix else split_micro_batches
        return split(rows, config.micro_batch_size, config.micro_batch_tokens)

    def _batch(self, chunk: Sequence[Row]) -> dict[str, torch.Tensor]:
        device = self.accelerator.device
        if self.config.padding_free:
            packed = pack_padding_free(chunk, self.pad_id, self.config.shared_prefix)
        elif self.config.shared_prefix:
            packed = pack_shared(chunk, self.pad_id)
        else:
            packed = pack_rows(chunk, self.pad_id)
        return {k: v.to(device) for k, v in packed.items()}

    @torch.no_grad()
    def _old_logprobs(self, chunks: Sequence[Sequence[Row]]) -> list[torch.Tensor]:
        """The trainer's log-probs of every chunk before the update (pi_old)."""
        self.model.eval()
        return [self._logprobs(self.policy, self._batch(c)) for c in chunks]

    def _accumulating(self, last: bool):
        """DDP all-reduces in the backward of the last micro-batch only (forward and backward
        must both run inside `no_sync`); ZeRO-2 reduces in every backward anyway."""
        if self.deepspeed or last:
            return nullcontext()
        return self.accelerator.no_sync(self.model)

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        """Accumulate gradients; under DeepSpeed the last micro-batch also takes the optimizer
        step (the engine clips, steps and zeroes)."""
        # DDP and ZeRO average gradients over processes; the loss is already a share of the
        # global sum, so undo the average.
        loss = loss * self.accelerator.num_processes
        if not self.deepspeed:
            self.accelerator.backward(loss)
            return
        self.model.set_gradient_accumulation_boundary(last)
        self.model.backward(loss)
        if last:
            self.model.step()

    def _step(
        self,
        chunks: Sequence[Sequence[Row]],
        micro_batches: int,
        totals: Totals,
        old_chunks: list[torch.Tensor] | None,
    ) -> dict[str, float]:
        """One optimizer step over `chunks`, accumulated over `micro_batches` micro-batches (a
        process with fewer chunks than the others runs zero-loss ones, so that every process
        reduces as often); its metrics (`_optimizer_step`)."""
        self.model.train()
        sums = {
            "loss": 0.0,
            "tokens": 0.0,
            "clip_fraction": 0.0,
            "kl": 0.0,
            "sampler_logprob_diff": 0.0,
        }
        mismatch = dict.fromkeys(MISMATCH_METRICS if old_chunks is not None else (), 0.0)
        for index in range(micro_batches):
            last = index == micro_batches - 1
            with self._accumulating(last):
                if index >= len(chunks):
                    output = self.model(**zero_loss_batch(self.pad_id, self.accelerator.device))
                    self._backward(output.logits.sum() * 0.0, last)
                    continue
                old = old_chunks[index] if old_chunks is not None else None
                loss, step_metrics = self._micro_batch_loss(chunks[index], old, totals, mismatch)
                self._backward(loss, last)
            sums["loss"] += loss.item()
            for key in ("clip_fraction", "kl", "sampler_logprob_diff"):
                sums[key] += step_metrics[key] * step_metrics["tokens"]
            sums["tokens"] += step_metrics["tokens"]
        return self._optimizer_step(sums, mismatch)

    def _micro_batch_loss(
        self,
        chunk: Sequence[Row],
        old: torch.Tensor | None,
        totals: Totals,
        mismatch: dict[str, float],
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """One micro-batch's share of the loss and its metrics (`policy_loss`): the policy's
        log-probs of `chunk`, the frozen base's for the KL term (`beta` > 0) and, with `old`
        log-probs (pi_old), importance weights, whose sampler mismatch is added to `mismatch`
        weighted by the chunk's completion tokens."""
        config = self.config
        batch = self._batch(chunk)
        logprobs = self._logprobs(self.model, batch)
        ref = None
        if config.beta > 0:
            with torch.no_grad(), self.policy.disable_adapter():
                ref = self._logprobs(self.policy, batch)
        weights = None
        if old is not None:
            weights, chunk_mismatch = importance_weights(
                old,
                batch["sampler_logprobs"],
                batch["completion_mask"],
                self.importance_sampling,
                config.importance_sampling_cap,
            )
            share = float(batch["completion_mask"].sum())
            for key in mismatch:
                mismatch[key] += chunk_mismatch[key] * share
        return policy_loss(
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

    def _optimizer_step(
        self, sums: dict[str, float], mismatch: dict[str, float]
    ) -> dict[str, float]:
        """Clip, step and zero after the micro-batches; the step's metrics from their `sums`
        and `mismatch`, summed over processes."""
        # Under DeepSpeed the step already happened; this returns the engine's gradient norm.
        grad_norm = self.accelerator.clip_grad_norm_(
            [p for p in self.model.parameters() if p.requires_grad], self.config.max_grad_norm
        )
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        # Every process's loss is its share of the global one: the step's metrics are sums.
        sums = sum_over_processes({**sums, **mismatch}, self.accelerator)
        tokens = max(sums["tokens"], 1.0)
        return {
            **{key: sums[key] / tokens for key in mismatch},
            "loss/policy": sums["loss"],
            "loss/clip_fraction": sums["clip_fraction"] / tokens,
            "loss/kl": sums["kl"] / tokens,
            "loss/sampler_logprob_diff": sums["sampler_logprob_diff"] / tokens,
            "loss/grad_norm": float(grad_norm),
            "loss/learning_rate": self.scheduler.get_last_lr()[0],
        }
