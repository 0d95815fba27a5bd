"""One learner update on a fixed global batch; run under `accelerate launch` by test_ddp.py.

usage: accelerate launch [--multi_gpu | --config_file ZERO2] --num_processes N
           tests/train/ddp_update.py MODEL_DIR OUT_FILE LOSS SPLIT [PREFIX]
Each process takes its share of the trajectories (as the trainer does; SPLIT `even` deals them
round-robin, `uneven` gives rank 0 two trajectories and 2 micro-batches against rank 1's 6),
PREFIX `repeated` or `shared` gives trajectories 4 at a time a common 40-token prompt prefix,
trained repeated or with `grpo.shared_prefix`; the process updates once, and rank 0 saves the all-reduced gradients (not under DeepSpeed, whose engine steps and
zeroes them inside the backward), the update's metrics and the updated LoRA weights to OUT_FILE.
"""

import sys

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


def main() -> None:
    model_dir, out_file, loss, split = sys.argv[1:5]
    prefix = sys.argv[5] if len(sys.argv) > 5 else ""
    accelerator = make_accelerator()
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
        beta=0.05,
        max_grad_norm=1e9,
        shared_prefix=prefix == "shared",
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
    if split == "even":
        mine = [r for r in fixed_rows(bool(prefix)) if r.trajectory % world == rank]
    else:
        mine = [r for r in fixed_rows(bool(prefix)) if (r.trajectory >= 2) == (rank == world - 1)]
    metrics = learner.update(mine)
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
        torch.save(record, out_file)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
