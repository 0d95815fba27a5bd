"""Learner updates on a fixed global batch, one per CASE; run under `accelerate launch` by
test_ddp.py.

usage: accelerate launch [--multi_gpu | --config_file ZERO2] --num_processes N
           tests/train/ddp_update.py MODEL_DIR OUT_DIR CASE [CASE ...]

A CASE is a loss (`grpo`, `reinforce`) and options joined by `+`:
- `even`: over several processes, deal the trajectories round-robin; otherwise rank 0 gets two
  trajectories (2 micro-batches) against the last rank's six (6). One process takes them all.
- `repeated` / `shared`: trajectories 4 at a time share a 40-token prompt prefix, trained
  repeated or with `grpo.shared_prefix`;
- `compiled`: `grpo.compile_layers`; `checkpointing`: `grpo.gradient_checkpointing`;
  `padfree`: `grpo.padding_free`;
  `tokens`: micro-batches of at most 60 padded tokens (`grpo.micro_batch_tokens`) instead of 2 rows.

Each case starts from the same model, updates once, and rank 0 saves OUT_DIR/CASE.pt: the
all-reduced gradients (not under DeepSpeed, whose engine steps and zeroes them inside the
backward), the update's metrics and the updated LoRA weights. The cases share one launch
because each launch costs every process its imports and its process group.
"""

import sys
from pathlib import Path

import torch

from lexrl.config import GRPOConfig, LoraConfig, ModelConfig
from lexrl.models import add_lora, load_base
from lexrl.train.advantages import Row
from lexrl.train.learner import Learner, make_accelerator


def fixed_rows(task_prefix: bool = False) -> list[Row]:
    generator = torch.Generator().manual_seed(0)
    # Their own generator, so the rows without prefixes stay those the other tests always had.
    prefix_generator = torch.Generator().manual_seed(1)
    prefixes = [torch.randint(3, 200, (40,), generator=prefix_generator) for _ in range(2)]
    rows = []
    for trajectory in range(8):
        advantage = float(torch.randn(1, generator=generator))
        for _ in range(1 + trajectory % 3):
            prompt = torch.randint(
                3, 200, (int(torch.randint(4, 15, (1,), generator=generator)),), generator=generator
            )
            if task_prefix:
                prompt = torch.cat([prefixes[trajectory // 4], prompt])
            completion = torch.randint(
                3, 200, (int(torch.randint(1, 7, (1,), generator=generator)),), generator=generator
            )
            logprobs = (-torch.rand(len(completion), generator=generator) * 3).tolist()
            rows.append(
                Row(
                    prompt.tolist(),
                    completion.tolist(),
                    logprobs,
                    advantage,
                    0.8,
                    trajectory,
                    "planner",
                )
            )
    return rows


CASE_OPTIONS = {"even", "repeated", "shared", "compiled", "checkpointing", "tokens", "padfree"}


def update_once(model_dir: str, case: str, accelerator) -> dict | None:
    """The record of one CASE (rank 0), or None on the other ranks."""
    loss, *options = case.split("+")
    assert set(options) <= CASE_OPTIONS, f"unknown options in {case!r}"
    model, tokenizer = load_base(ModelConfig(), path=model_dir)
    policy = add_lora(model, LoraConfig(r=4, alpha=8), seed=0)
    # A non-zero B makes the first step's gradient reach both LoRA matrices.
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.copy_(
                    torch.randn(parameter.shape, generator=torch.Generator().manual_seed(1)) * 0.01
                )
    # No clipping: clipping (and Adam's first step) would hide a wrongly scaled gradient.
    config = GRPOConfig(
        loss=loss,
        learning_rate=1e-2,
        micro_batch_size=2,
        micro_batch_tokens=60 if "tokens" in options else None,
        beta=0.05,
        max_grad_norm=1e9,
        shared_prefix="shared" in options,
        gradient_checkpointing="checkpointing" in options,
        compile_layers="compiled" in options,
        padding_free="padfree" in options,
    )
    learner = Learner(
        policy, config, max_steps=3, accelerator=accelerator, pad_id=tokenizer.pad_token_id
    )
    grads = {}
    step = learner.optimizer.step

    def capture_gradients_then_step(*args, **kwargs):
        grads.update(
            {n: p.grad.clone() for n, p in learner.policy.named_parameters() if p.grad is not None}
        )
        return step(*args, **kwargs)

    learner.optimizer.step = capture_gradients_then_step
    rank, world = accelerator.process_index, accelerator.num_processes
    rows = fixed_rows("repeated" in options or "shared" in options)
    if world == 1:
        mine = rows
    elif "even" in options:
        mine = [r for r in rows if r.trajectory % world == rank]
    else:
        mine = [r for r in rows if (r.trajectory >= 2) == (rank == world - 1)]
    metrics = learner.update(mine)
    record = None
    if accelerator.is_main_process:
        lora = {n: p.detach().float() for n, p in learner.policy.named_parameters() if "lora_" in n}
        record = {
            "num_processes": world,
            "deepspeed": learner.deepspeed,
            "rows_on_rank0": len(mine),
            "lora": lora,
            "grads": grads,
            "metrics": metrics,
        }
    accelerator.free_memory()
    return record


def main() -> None:
    model_dir, out_dir, *cases = sys.argv[1:]
    accelerator = make_accelerator()
    for case in cases:
        record = update_once(model_dir, case, accelerator)
        if record is not None:
            torch.save(record, Path(out_dir) / f"{case}.pt")
        accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
