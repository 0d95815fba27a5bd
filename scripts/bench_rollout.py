"""Episodes/s of the statute env with the batched `hf` backend vs. the same episodes one at a time.

    python scripts/bench_rollout.py configs/demo_cpu.yaml [--tasks 8] [--generations 8]

Both runs use the same policy (the demo's warm-started tiny model), the same tasks and the same
seed; "one at a time" allows a single episode in flight, so every LLM call is a batch of one.
"""

from __future__ import annotations

import argparse
import time

import torch
from accelerate import Accelerator
from transformers import PreTrainedTokenizerBase

from lexrl.config import load_config
from lexrl.envs.base import Env
from lexrl.policy import Policy
from lexrl.rollout.engine import run_groups
from lexrl.rollout.hf_backend import HFBackend
from lexrl.train.trainer import build_policy
from lexrl.types import Task


def measure(
    env: Env,
    backend: HFBackend,
    tokenizer: PreTrainedTokenizerBase,
    tasks: list[Task],
    generations: int,
    max_concurrent: int,
    max_new_tokens: int,
) -> tuple[float, int, int]:
    """(episodes/s, LLM calls, generate batches) for one seeded rollout of `tasks`."""
    torch.manual_seed(0)
    backend.batches_run = 0
    started = time.perf_counter()
    groups = run_groups(
        env,
        tasks,
        generations,
        lambda task: Policy(backend, tokenizer, task.id, max_new_tokens),
        max_concurrent=max_concurrent,
        progress=False,
    )
    seconds = time.perf_counter() - started
    episodes = sum(len(g.trajectories) for g in groups)
    turns = sum(len(t.turns) for g in groups for t in g.trajectories)
    return episodes / seconds, turns, backend.batches_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--generations", type=int, default=8)
    args, overrides = parser.parse_known_args()
    config = load_config(args.config, overrides)
    env, policy, tokenizer, _ = build_policy(config, Accelerator(cpu=True))
    policy.eval()
    backend = HFBackend(
        policy, tokenizer, config.rollout.max_batch_size, config.rollout.batch_wait_ms
    )
    tasks = env.tasks("train")[: args.tasks]
    max_new = config.rollout.max_new_tokens
    measure(env, backend, tokenizer, tasks[:1], 2, 256, max_new)  # warm-up
    batched = measure(
        env,
        backend,
        tokenizer,
        tasks,
        args.generations,
        config.rollout.max_concurrent_episodes,
        max_new,
    )
    serial = measure(env, backend, tokenizer, tasks, args.generations, 1, max_new)
    episodes = args.tasks * args.generations
    print(
        f"episodes: {episodes} ({args.tasks} tasks x {args.generations}), torch threads: {torch.get_num_threads()}"
    )
    print(
        f"batched      : {batched[0]:7.2f} episodes/s  ({batched[1]} LLM calls in {batched[2]} generate batches)"
    )
    print(
        f"one at a time: {serial[0]:7.2f} episodes/s  ({serial[1]} LLM calls in {serial[2]} generate batches)"
    )
    print(f"speed-up     : {batched[0] / serial[0]:7.2f}x")


if __name__ == "__main__":
    main()
