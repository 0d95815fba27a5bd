"""Supervised warm-start on the env's scripted trajectories, so GRPO starts from a policy that
speaks the agents' JSON formats (a random-weight model never produces a valid action).

The env's own workflow runs with a `ScriptedPolicy` (the teacher answers instead of the model),
so the SFT examples carry exactly the prompts GRPO will later sample from. Loss: token cross-
entropy on completions only; all weights train (this builds the demo's *base* model; GRPO then
trains only a LoRA on top of it). The result is cached under a key of the base, the settings, the
SFT tokens and the code that trains and saves it.

A long build (the argument demo's: 2,250 steps) stops like a training step: SIGTERM or Ctrl-C
finishes the step in progress, saves the progress beside the cache entry (`<entry>.partial/`, also
every `warmstart.save_every` steps), says so in one line and exits 0; the same command continues
it to the weights an uninterrupted build ends at. Progress nobody continues (its settings, env
or code changed since) is removed by the next build once a day old (`remove_abandoned_progress`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pickle
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from filelock import FileLock, Timeout
from tqdm.auto import tqdm, trange
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lexrl.cache_entry import entry_lock, is_built, last_touched, lock_path
from lexrl.config import WarmstartConfig
from lexrl.envs.base import Env
from lexrl.errors import ConfigError, WarmstartInterrupted
from lexrl.models import code_version, save_model, save_staged
from lexrl.plugin_errors import note_task
from lexrl.policy import ScriptedPolicy
from lexrl.stop_signals import CancellingStop
from lexrl.train.advantages import Row
from lexrl.train.checkpoint import save_torch
from lexrl.train.learner import completion_logprobs, pack_rows
from lexrl.train.preemption import StopRequest


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

    stop = ReplayStop(num_episodes)

    async def play() -> list:
        episodes = []
        # A large warm-start plays its teacher for minutes before the first SFT step.
        for index in trange(num_episodes, desc="warm-start (teacher episodes)", leave=False):
            stop.check(index)
            task = tasks[index % len(tasks)]
            try:
                policy = ScriptedPolicy(tokenizer, task.id, env.teacher(task, rng))
                episode = await stop.cancellable(env.run_episode(task, policy))
                stop.check(index)  # a signal cancelled this episode: `index` were played
                episodes.append(episode)
            except Exception as error:
                note_task(error, task.id)
                raise
        return episodes

    with stop:
        played = asyncio.run(play())
        stop.check(num_episodes)
    rows = []
    for trajectory in played:
        # An endpoint judge's replies are kept as turns too, but they are not the policy's to learn.
        for turn in (turn for turn in trajectory.turns if turn.trainable):
            rows.append(
                Row(turn.prompt_ids, turn.completion_ids, turn.logprobs, 1.0, 1.0, 0, turn.role)
            )
    return rows


class ReplayStop(CancellingStop):
    """Within `with`, SIGTERM or SIGINT cancels the teacher's episode in progress
    (`cancellable`, `lexrl.stop_signals.CancellingStop`) and `check` ends the replay with
    `WarmstartInterrupted`; a second signal acts as it would without us. Nothing of the replay is
    kept (the rows it makes key the cache entry, so they are played again in full), but SFT
    progress saved earlier in the entry's `.partial` folder is, and the same command continues
    from it."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.total = total

    def check(self, done: int) -> None:
        """`WarmstartInterrupted` if a signal came, `done` episodes having been played."""
        if self.signum is None:
            return
        raise WarmstartInterrupted(
            f"{signal.Signals(self.signum).name}: warm-start interrupted while its scripted "
            f"teacher played its episodes ({done} of {self.total} played; they are played again "
            "in full, any SFT progress saved earlier is kept); run the same command again to "
            "continue",
            self.signum,
        )


PROGRESS_FILE = "progress.pt"


@dataclass
class SftProgress:
    """Where an SFT build is: what `supervised_finetune` saves and continues from."""

    folder: Path
    """`<cache entry>.partial/`, beside the entry it becomes."""
    save_every: int
    stop: StopRequest | None = None
    """Asked (SIGTERM, Ctrl-C): save after the step in progress and raise `SftStopped`."""

    def load(self) -> dict[str, Any] | None:
        path = self.folder / PROGRESS_FILE
        if not path.is_file():
            return None
        try:
            return torch.load(path, weights_only=True)
        except (RuntimeError, OSError, EOFError, pickle.UnpicklingError) as error:
            print(f"warning: {path} cannot be read ({error}); the warm-start starts over")
            return None

    def save(self, state: dict[str, Any]) -> None:
        """Write `state` beside the file it replaces, then rename it into place: a kill or a
        full disk leaves the previous progress whole (the CLI names the file of a failed write)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        staged = self.folder / f".{PROGRESS_FILE}.tmp"
        try:
            save_torch(state, staged)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        os.replace(staged, self.folder / PROGRESS_FILE)


def sft_stop_request(folder: Path) -> StopRequest:
    """`StopRequest` with the warm-start's words: it is continued by the same command (from the
    progress in `folder`), not by `--run.resume true` (a run's checkpoints)."""
    return StopRequest(
        finishing="finishing this SFT step and saving the warm-start's progress (Ctrl-C again "
        "aborts; the same command then continues from the progress last saved)",
        aborted="warm-start aborted; run the same command again to continue it from the "
        f"progress last saved in {folder}",
    )


class SftStopped(Exception):
    """The SFT stopped at a signal, its progress saved (`SftProgress`)."""

    def __init__(self, step: int, steps: int, signal_name: str) -> None:
        super().__init__(step, steps, signal_name)
        self.step, self.steps, self.signal_name = step, steps, signal_name


def supervised_finetune(
    model: PreTrainedModel,
    rows: list[Row],
    config: WarmstartConfig,
    pad_id: int,
    seed: int,
    progress: SftProgress | None = None,
) -> list[float]:
    """Cross-entropy on completion tokens; returns the loss per batch. With `progress`, continues
    from the progress saved there, saves it every `save_every` steps, and on a stop request saves
    it after the step in progress and raises `SftStopped`: a build continued so ends at the same
    weights as one never stopped (the batches come from one seeded generator, saved with it)."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate)
    per_epoch = (len(rows) + config.batch_size - 1) // config.batch_size
    steps = config.epochs * per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / max(steps, 1))
    done, losses, order = 0, [], []
    saved = progress.load() if progress is not None else None
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        generator.set_state(saved["generator"])
        done, losses, order = saved["step"], saved["losses"], saved["order"]
        print(f"warm-start: continuing from step {done} of {steps} saved in {progress.folder}")
    model.train()
    with tqdm(total=steps, initial=done, desc="warm-start (SFT)", leave=False) as bar:
        for step in range(done, steps):
            start = step % per_epoch * config.batch_size
            if start == 0:
                order = torch.randperm(len(rows), generator=generator).tolist()
            batch = pack_rows([rows[i] for i in order[start : start + config.batch_size]], pad_id)
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
            if progress is None or step + 1 == steps:
                continue
            stopping = progress.stop is not None and progress.stop.signal is not None
            if stopping or (step + 1) % progress.save_every == 0:
                progress.save(
                    {
                        "step": step + 1,
                        "losses": losses,
                        "order": order,
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(),
                        "generator": generator.get_state(),
                    }
                )
            if stopping:
                raise SftStopped(step + 1, steps, progress.stop.name)
    model.eval()
    return losses


def warmstart_dir(
    base_dir: Path, config: WarmstartConfig, seed: int, rows: list[Row], dtype: str
) -> Path:
    """Cache folder keyed by the base and the dtype it is trained in, the settings, the exact SFT
    tokens (so any change to the env's prompts or workflow builds a new warm-start instead of
    reusing a stale one) and the code and libraries that fine-tune and save the model."""
    version = code_version(
        supervised_finetune, build_warmstarted_base, _build, pack_rows, completion_logprobs
    )
    # When the progress is saved changes nothing that is built.
    settings = {k: v for k, v in config.__dict__.items() if k != "save_every"}
    key = hashlib.sha256(
        json.dumps([base_dir.name, dtype, settings, seed, version], sort_keys=True).encode()
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
    announce: Callable[[int, Path], None] | None = None,
) -> Path:
    """Fine-tune the model in `base_dir` on scripted episodes and save it beside it (cached).
    `announce(rows, target)` is called once the entry `target` is known not to be cached yet,
    before it is built (or waited for, while another process builds it), with the number of
    SFT rows; a cached entry is only named."""
    model, tokenizer = load(base_dir)
    rows = scripted_rows(env, tokenizer, config.num_episodes, seed)
    target = warmstart_dir(base_dir, config, seed, rows, str(model.dtype))
    if not is_built(target):
        if announce is not None:
            announce(len(rows), target)
        # Another seed's run sharing the cache may be building the same entry: wait for it.
        with entry_lock(target):
            if not is_built(target):
                _build(model, tokenizer, rows, config, seed, target)
                return target
    print(f"warm-start: cached {target} (built once for these settings, reused by every seed)")
    return target


ABANDONED_S = 24 * 3600
"""How long the saved progress of another warm-start is kept untouched before a build removes
it."""


def remove_abandoned_progress(target: Path, max_age_s: float = ABANDONED_S) -> None:
    """Remove the saved SFT progress (`<entry>.partial/`) of every other warm-start in the cache
    folder of `target` that nothing has touched for `max_age_s` and no process is building (its
    entry lock is free), saying so in one line each. Such progress is continued only by a build
    of the very same key, which a change of settings, env prompts or code never gives again; the
    progress of `target` itself is what this build continues, so it is kept however old."""
    own = f"{target.name}.partial"
    for folder in target.parent.glob("*-warm-*.partial"):
        if folder.name == own or last_touched(folder) >= time.time() - max_age_s:
            continue
        lock = FileLock(lock_path(folder.with_name(folder.name.removesuffix(".partial"))))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            lock.release()
        if not folder.exists():
            print(
                f"warm-start: removed {folder}, another warm-start's progress untouched for a day"
            )


def _build(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    rows: list[Row],
    config: WarmstartConfig,
    seed: int,
    target: Path,
) -> None:
    """Fine-tune `model` on `rows`, continuing from saved progress, and save it as `target`; a
    SIGTERM or SIGINT saves the progress and exits 0 (the same command continues it)."""
    steps = config.epochs * -(-len(rows) // config.batch_size)
    # The first run of a demo spends most of its time here; say that it happens once.
    print(
        f"warm-start: {steps} SFT steps on {len(rows)} scripted rows, built once and cached in "
        f"{target}; later runs and other seeds of these settings reuse it"
    )
    remove_abandoned_progress(target)
    torch.manual_seed(seed)
    progress = SftProgress(target.parent / f"{target.name}.partial", config.save_every)
    progress.stop = sft_stop_request(progress.folder)
    try:
        losses = supervised_finetune(model, rows, config, tokenizer.pad_token_id, seed, progress)
    except SftStopped as stopped:
        print(
            f"{stopped.signal_name}: warm-start stopped after SFT step {stopped.step} of "
            f"{stopped.steps}, saved in {progress.folder}; run the same command to continue it",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(0) from None
    finally:
        progress.stop.restore()

    def write(staging: Path) -> None:
        save_model(model, tokenizer, staging)
        summary = {"rows": len(rows), "first_loss": losses[0], "last_loss": losses[-1]}
        (staging / "warmstart.json").write_text(json.dumps(summary, indent=2))

    save_staged(target, write)
    shutil.rmtree(progress.folder, ignore_errors=True)
    if progress.stop.signal is not None:  # asked during the last step: the entry is whole
        print(f"{progress.stop.name}: warm-start cached in {target}; stopped", file=sys.stderr)
        raise SystemExit(0)
