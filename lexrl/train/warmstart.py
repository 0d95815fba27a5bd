"""Supervised warm-start on the env's scripted trajectories, so GRPO starts from a policy that
speaks the agents' JSON formats (a random-weight model never produces a valid action).

The env's own workflow runs with a `ScriptedPolicy` (the teacher answers instead of the model),
so the SFT examples carry exactly the prompts GRPO will later sample from. Loss: token cross-
entropy on completions only; all weights train (this builds the demo's *base* model; GRPO then
trains only a LoRA on top of it). The result is cached under a key of the base, the settings, the
SFT tokens and the code that trains and saves it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lexrl.config import WarmstartConfig
from lexrl.envs.base import Env
from lexrl.errors import ConfigError
from lexrl.models import code_version, replace_dir
from lexrl.rollout.policy import ScriptedPolicy
from lexrl.train.advantages import Row
from lexrl.train.learner import completion_logprobs, pack_rows


def scripted_rows(
    env: Env, tokenizer: PreTrainedTokenizerBase, num_episodes: int, seed: int
) -> list[Row]:
    rng = random.Random(seed)
    tasks = env.warmstart_tasks()
    if not tasks:
        raise ConfigError(
            f"env {env.name!r} has no tasks its scripted teacher can play: set "
            "`warmstart.enabled: false`"
        )

    async def play() -> list:
        episodes = []
        for index in range(num_episodes):
            task = tasks[index % len(tasks)]
            policy = ScriptedPolicy(tokenizer, task.id, env.teacher(task, rng))
            episodes.append(await env.run_episode(task, policy))
        return episodes

    rows = []
    for trajectory in asyncio.run(play()):
        # An endpoint judge's replies are kept as turns too, but they are not the policy's to learn.
        for turn in (turn for turn in trajectory.turns if turn.trainable):
            rows.append(
                Row(turn.prompt_ids, turn.completion_ids, turn.logprobs, 1.0, 1.0, 0, turn.role)
            )
    return rows


def supervised_finetune(
    model: PreTrainedModel, rows: list[Row], config: WarmstartConfig, pad_id: int, seed: int
) -> list[float]:
    """Cross-entropy on completion tokens; returns the loss per batch."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    steps = config.epochs * ((len(rows) + config.batch_size - 1) // config.batch_size)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / max(steps, 1))
    model.train()
    losses = []
    with tqdm(total=steps, desc="warm-start (SFT)", leave=False) as bar:
        for _ in range(config.epochs):
            order = torch.randperm(len(rows), generator=generator).tolist()
            for start in range(0, len(rows), config.batch_size):
                batch = pack_rows(
                    [rows[i] for i in order[start : start + config.batch_size]], pad_id
                )
                logprobs = completion_logprobs(model, batch)
                mask = batch["completion_mask"]
                loss = -(logprobs * mask).sum() / mask.sum()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(loss.item())
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return losses


def warmstart_dir(
    base_dir: Path, config: WarmstartConfig, seed: int, rows: list[Row], dtype: str
) -> Path:
    """Cache folder keyed by the base and the dtype it is trained in, the settings, the exact SFT
    tokens (so any change to the env's prompts or workflow builds a new warm-start instead of
    reusing a stale one) and the code and libraries that fine-tune and save the model."""
    version = code_version(
        supervised_finetune, build_warmstarted_base, pack_rows, completion_logprobs
    )
    key = hashlib.sha256(
        json.dumps([base_dir.name, dtype, config.__dict__, seed, version], sort_keys=True).encode()
    )
    for row in rows:
        key.update(json.dumps([row.prompt_ids, row.completion_ids]).encode())
    return base_dir.parent / f"{base_dir.name}-warm-{key.hexdigest()[:12]}"


def build_warmstarted_base(
    env: Env,
    base_dir: Path,
    config: WarmstartConfig,
    seed: int,
    load: Callable[[Path], tuple[PreTrainedModel, PreTrainedTokenizerBase]],
) -> Path:
    """Fine-tune the model in `base_dir` on scripted episodes and save it beside it (cached)."""
    model, tokenizer = load(base_dir)
    rows = scripted_rows(env, tokenizer, config.num_episodes, seed)
    target = warmstart_dir(base_dir, config, seed, rows, str(model.dtype))
    if (target / "config.json").is_file():
        print(f"warm-start: cached {target} (built once for these settings, reused by every seed)")
        return target
    steps = config.epochs * -(-len(rows) // config.batch_size)
    # The first run of a demo spends most of its time here; say that it happens once.
    print(
        f"warm-start: {steps} SFT steps on {len(rows)} scripted rows, built once and cached in "
        f"{target}; later runs and other seeds of these settings reuse it"
    )
    torch.manual_seed(seed)
    losses = supervised_finetune(model, rows, config, tokenizer.pad_token_id, seed)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    (staging / "warmstart.json").write_text(
        json.dumps({"rows": len(rows), "first_loss": losses[0], "last_loss": losses[-1]}, indent=2)
    )
    replace_dir(staging, target)
    return target
