"""GRPO over whole multi-agent trajectories: the training loop.

Each step: take G tasks (each process whole tasks, or with fewer tasks than processes a share of
each task's K episodes) -> the episodes, run concurrently ->
rewards -> group advantages -> one row per trainable Turn -> micro-batched update of the LoRA
policy (base frozen) -> the rollout backend gets the new adapter version -> log -> checkpoint.

1 process:  lexrl train configs/demo_cpu.yaml
N processes (DDP, gloo on CPU / nccl on GPU):
            accelerate launch --multi_gpu --num_processes N -m lexrl.cli train configs/demo_cpu.yaml
Departures from LegalMALR (Li et al. 2026, arXiv:2601.17692): the demo base is warm-started on
scripted episodes first (`warmstart`), and the optimizer runs a fixed number of steps rather than
10 epochs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import set_seed
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from lexrl.config import Config, WarmstartConfig, save_config
from lexrl.envs import make_env
from lexrl.envs.base import Env, lead_role, role_actions, step_role, undeclared_components
from lexrl.envs.composite import composite, require_tasks
from lexrl.errors import ConfigError, EnvContractError, RunHalted
from lexrl.eval import before_after, degenerate_gain
from lexrl.eval.evaluate import (
    degenerate_baselines,
    eval_tasks,
    evaluate,
    print_markdown,
    print_summary,
)
from lexrl.eval.plots import headline_panels, plot_before_after, plot_learning_curve
from lexrl.eval.provenance import env_packages
from lexrl.generation import Backend
from lexrl.models import replace_dir
from lexrl.plugin_errors import package_of
from lexrl.policy import Policy
from lexrl.rollout.engine import run_groups
from lexrl.rollout.factory import make_backend
from lexrl.run_lock import refuse_another_run
from lexrl.secrets import write_text
from lexrl.train.advantages import (
    Row,
    Shard,
    rows_from_groups,
    shard_step,
    split_group_advantages,
)
from lexrl.train.base_model import build_policy
from lexrl.train.busy_cores import choose_torch_threads
from lexrl.train.checkpoint import (
    RUN_KEY,
    checkpoint_write_error,
    load_checkpoint,
    refuse_another_config,
    save_adapter,
    save_checkpoint,
    write_together,
)
from lexrl.train.learner import Learner, make_accelerator, sum_over_processes, uses_deepspeed
from lexrl.train.learning_signal import (
    SignalWatch,
    group_rows,
    progress_fields,
    signal_denominator,
    signal_keys,
    signal_sums,
    verdict_lines,
)
from lexrl.train.logger import RunLogger, console, failed_episodes
from lexrl.train.manifest import (
    CheckpointChoice,
    checkpoint_dir,
    choose_checkpoint,
    latest_checkpoint,
)
from lexrl.train.plan_report import refuse_if_cannot_fit, resolve_engine_memory
from lexrl.train.preemption import StopRequest
from lexrl.types import Group, Task


def importance_sampling_mode(config: Config) -> str:
    """`grpo.importance_sampling` with `auto` resolved for the configured backend."""
    mode = config.grpo.importance_sampling
    if mode != "auto":
        return mode
    return "none" if config.rollout.backend == "hf" else "sequence_mask"


KEEP_ADAPTER_FILES = 3


def sync_adapter(
    backend: Backend, policy: Any, output_dir: Path, version: int, accelerator: Accelerator
) -> float:
    """Hand the adapter of `version` to the rollout backend; returns the seconds it took.

    Backends that sample from the live weights only take the version number. Otherwise the main
    process saves the adapter (atomically); a shared server loads it once (main) and the other
    processes switch to it after the barrier; colocated engines each load it.
    """
    started = time.perf_counter()
    if not backend.needs_adapter_files:
        backend.use_adapter(version)
        return time.perf_counter() - started
    folder = output_dir / "adapters"
    target = folder / f"v{version:06d}"
    main = accelerator.is_main_process
    try:
        write_together(accelerator, lambda: main and write_adapter(policy, folder, target))
    except OSError as error:
        previous = latest_checkpoint(output_dir)
        raise checkpoint_write_error(error, target, previous, "adapter") from error
    if main or not backend.shared_by_processes:
        backend.load_adapter(target, version)
    accelerator.wait_for_everyone()
    if backend.shared_by_processes and not main:
        backend.use_adapter(version, target)
    if main:
        for old in sorted(folder.glob("v*"))[:-KEEP_ADAPTER_FILES]:
            shutil.rmtree(old, ignore_errors=True)
    return time.perf_counter() - started


def write_adapter(policy: Any, folder: Path, target: Path) -> None:
    """Save the adapter into `target` through a staging folder, which a failed write removes."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=".tmp-"))
    try:
        save_adapter(policy, staging)
        replace_dir(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def step_metrics(groups: list[Group], env: Env, rows: list[Row] | None = None) -> dict[str, float]:
    """Sums (not means) of this process's episode statistics and learning signal (`rows`, the
    step's training rows: `step_rows`; None: no token counts), reduced across processes later;
    each member env's own (for a mixture under `<env>/`, beside the step's totals)."""
    view = composite(env)
    by_group = [[] for _ in groups] if rows is None else group_rows(groups, rows)
    sums: dict[str, float] = {}
    if view.labels_members:
        # The step's totals over its envs: roles, validity and actions are each env's own.
        sums.update(_episode_sums(groups, None))
        sums.update(signal_sums(groups, by_group, (), None))
    for part in view.split([group.task for group in groups], groups):
        mine = [i for i, group in enumerate(groups) if view.member_name(group.task) == part.name]
        signal = signal_sums(
            part.groups, [by_group[i] for i in mine], part.env.roles, validity_metric(part.env)
        )
        for key, value in {**_episode_sums(part.groups, lead_role(part.env)), **signal}.items():
            sums[view.key(part.name, key)] = value
    return sums


def check_components(env: Env, groups: list[Group]) -> None:
    """`EnvContractError` (an `env error`) when an episode of `groups` reports a reward
    component its env does not declare (`Env.reward_components`): it would never be logged."""
    view = composite(env)
    for part in view.split([group.task for group in groups], groups):
        trajectories = [t for group in part.groups or [] for t in group.trajectories]
        undeclared = undeclared_components(part.env, trajectories)
        if undeclared:
            declared = ", ".join(getattr(part.env, "reward_components", ())) or "none"
            raise EnvContractError(
                f"env {part.name!r} ({package_of(part.env)}) reports reward component(s) "
                f"{', '.join(undeclared)} that its `reward_components` do not declare "
                f"(declared: {declared}): add them there, or they are never logged"
            )


def validity_metric(env: Env) -> str | None:
    """The env's validity metric (`Env.validity_metric_name`), None for a stand-in without."""
    name = getattr(env, "validity_metric_name", None)
    return name() if name is not None else None


def _episode_sums(groups: list[Group], lead: str | None) -> dict[str, float]:
    """The sums of `step_metrics` over `groups`, a step's action credited to the role it names,
    else to `lead` (`lead_role`; None: to none)."""
    trajectories = [t for g in groups for t in g.trajectories]
    sums: Counter[str] = Counter()
    sums["count/episodes"] = len(trajectories)
    for group in groups:
        rewards = torch.tensor(group.rewards)
        rewards = rewards[~rewards.isnan()]
        if rewards.numel():
            sums["reward/group_std"] += float(rewards.std(unbiased=False))
            sums["count/groups"] += 1
    for trajectory in trajectories:
        for turn in trajectory.turns:
            sums[f"agent/{turn.role}/turns"] += 1
            sums[f"agent/{turn.role}/tokens"] += len(turn.completion_ids)
            sums["perf/tokens_generated"] += len(turn.completion_ids)
        if trajectory.failed:
            sums["judge/failed"] += 1
            continue
        for role in {turn.role for turn in trajectory.turns}:
            sums[f"agent/{role}/reward"] += trajectory.role_rewards.get(role, trajectory.reward)
            sums[f"agent/{role}/rewarded"] += 1
        sums["reward/total"] += trajectory.reward
        for key, value in trajectory.components.items():
            sums[f"reward/{key}"] += value
        for key, value in trajectory.metrics.items():
            sums[f"env/{key}"] += value
            sums[f"env/{key}/reported"] += 1
        for step in trajectory.steps:
            role = step_role(step, lead)
            if step.get("action") and role:
                sums[f"agent/{role}/action/{step['action']}"] += 1
    return dict(sums)


def reduce_metric_sums(
    sums: dict[str, float],
    keys: list[str],
    accelerator: Accelerator,
    members: list[str] | None = None,
) -> dict[str, float]:
    """Sum over processes, then turn sums into means (`metric_means`), for the whole step and,
    for a mixture of the envs `members`, for each that had episodes in it (`<env>/...`)."""
    totals = sum_over_processes({k: float(sums.get(k, 0.0)) for k in keys}, accelerator)
    prefixes = [f"{name}/" for name in members or []]
    by_prefix: dict[str, dict[str, float]] = {prefix: {} for prefix in ["", *prefixes]}
    for key, value in totals.items():
        prefix = next((p for p in prefixes if key.startswith(p)), "")
        by_prefix[prefix][key[len(prefix) :]] = value
    out = {}
    for prefix, part in by_prefix.items():
        if prefix and not part["count/episodes"]:
            continue
        out.update({prefix + key: value for key, value in metric_means(part).items()})
    return out


def metric_means(totals: dict[str, float]) -> dict[str, float]:
    """Means from summed statistics: per scored episode (rewards, each role's actions; a failed
    episode is counted in `judge/failed` instead), per episode that reports it (an env metric:
    `right_decision_arguable` comes only from arguable triples), per episode (turns), per group
    (reward std), per turn (`agent/<role>/tokens`). A mean over nothing is left out: a step
    whose every episode failed has no reward, which a 0 would hide."""
    out = {"count/episodes": totals["count/episodes"]}
    for key, value in totals.items():
        if key in ("count/episodes", "count/groups") or key.endswith(("/rewarded", "/reported")):
            continue
        count = _mean_over(key, totals)
        if count is None:
            out[key] = value
        elif count:
            out[key] = value / count
    return out


def _mean_over(key: str, totals: dict[str, float]) -> float | None:
    """What the sum `key` is averaged over (`metric_means`); None for a count logged as is."""
    if key.startswith("signal/"):
        count = signal_denominator(key)
        return None if count is None else totals[count]
    if key == "reward/group_std":
        return totals["count/groups"]
    if key.startswith("env/"):
        return totals[f"{key}/reported"]
    if key.startswith("reward/") or is_action_key(key):
        return totals["count/episodes"] - totals["judge/failed"]
    if key.endswith("/turns"):
        return totals["count/episodes"]
    if key.endswith("/tokens"):
        return totals[key.replace("/tokens", "/turns")]
    if key.startswith("agent/") and key.endswith("/reward"):
        return totals[key.replace("/reward", "/rewarded")]
    return None


def is_action_key(key: str) -> bool:
    """Whether `key` counts a role's action (`agent/<role>/action/<name>`)."""
    parts = key.split("/")
    return len(parts) == 4 and parts[0] == "agent" and parts[2] == "action"


def metric_keys(env: Env) -> list[str]:
    """The summed statistics of a step (`step_metrics`): the reward, its components, the env
    metrics and each role's numbers, of each member env (for a mixture under `<env>/`, after
    the step's totals)."""
    view = composite(env)
    keys = metric_keys_of(None) if view.labels_members else []
    for name, member in view.members.items():
        keys += [view.key(name, key) for key in metric_keys_of(member)]
    return keys


def metric_keys_of(env: Env | None) -> list[str]:
    keys = [
        "count/episodes",
        "count/groups",
        "reward/total",
        "reward/group_std",
        "perf/tokens_generated",
        "judge/failed",
    ]
    if env is None:
        return keys + signal_keys((), None)
    keys += signal_keys(env.roles, validity_metric(env))
    keys += [f"reward/{c}" for c in getattr(env, "reward_components", ())]
    for metric in getattr(env, "episode_metrics", ()):
        keys += [f"env/{metric}", f"env/{metric}/reported"]
    for role, actions in role_actions(env).items():
        keys += [f"agent/{role}/action/{action}" for action in actions]
    for role in env.roles:
        keys += [f"agent/{role}/{name}" for name in ("turns", "tokens", "reward", "rewarded")]
    return keys


def sample_rows(groups: list[Group], tokenizer: PreTrainedTokenizerBase) -> list[dict[str, Any]]:
    """The turns of the first trajectory of each group, for reading (W&B table, samples.jsonl)."""
    rows = []
    for group in groups:
        trajectory = group.trajectories[0]
        for turn in trajectory.turns:
            prompt = tokenizer.decode(turn.prompt_ids, skip_special_tokens=True)
            rows.append(
                {
                    "task": trajectory.task_id,
                    "role": turn.role,
                    "prompt_tail": prompt[-300:],
                    "completion": turn.text,
                    "reward": trajectory.reward,
                    "adapter_version": turn.adapter_version,
                }
            )
    return rows


@dataclass
class Run:
    """What the steps of a run share."""

    config: Config
    accelerator: Accelerator
    shard: Shard
    """This process's share of each step (`shard_step`)."""
    env: Env
    tokenizer: PreTrainedTokenizerBase
    learner: Learner
    backend: Backend
    env_packages: dict[str, Any]
    """The env's package, version and data hash (`env_packages`), recorded in each checkpoint's
    manifest; computed once, as hashing the data is not free."""

    @property
    def output_dir(self) -> Path:
        return Path(self.config.run.output_dir)

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process


@dataclass
class Episodes:
    """A step's episodes on this process."""

    tasks: list[Task]
    """This process's share of the step's tasks."""
    groups: list[Group]
    seconds: float
    """How long the rollout took."""
    next_positions: dict[str, int]
    """The env data positions after the step's tasks."""


def step_shard(config: Config, accelerator: Accelerator) -> Shard:
    """This process's share of each step; refuses role advantages when groups are split."""
    per_step = config.grpo.tasks_per_step
    shard = shard_step(
        per_step,
        config.grpo.num_generations,
        accelerator.num_processes,
        accelerator.process_index,
    )
    if shard.samples < config.grpo.num_generations and config.grpo.advantages == "role":
        raise ValueError(
            f"`grpo.advantages: role` needs whole groups per process: `grpo.tasks_per_step` "
            f"({per_step}) must be a multiple of the {accelerator.num_processes} processes"
        )
    return shard


def build_run(config: Config, accelerator: Accelerator, shard: Shard) -> Run:
    """The env, the policy with its learner, and the rollout backend sampling from it."""
    set_seed(config.run.seed)
    env = make_env(config.env)
    require_tasks(env, "train")
    if config.run.eval_before or config.run.eval_after:
        require_tasks(env, config.eval.split)
    env, policy, tokenizer, base_path = build_policy(config, accelerator, env=env)
    learner = Learner(
        policy,
        config.grpo,
        config.run.max_steps,
        accelerator,
        tokenizer.pad_token_id,
        importance_sampling_mode(config),
    )
    backend = make_backend(config, learner.policy, tokenizer, base_path)
    packages = env_packages(config.env)
    return Run(config, accelerator, shard, env, tokenizer, learner, backend, packages)


def run_record(config: Config) -> dict[str, Any]:
    """The config values a checkpoint records and a resume must share: another env, base, LoRA
    shape or LoRA scale (`lora.alpha / lora.r` multiplies every update the adapter adds) would
    make the checkpoint compute another run's function, and another env option (its data, its
    reward's weights, its workflow) would go on optimising another objective from the same data
    positions (`refuse_another_config`); `EnvConfig.objective_options` says which env options
    count. Every other key may change on resume (`save_run_config` names the ones that did)."""
    record = {
        "env.name": config.env.name,
        "model.name_or_path": config.model.name_or_path,
        "lora.r": config.lora.r,
        "lora.alpha": config.lora.alpha,
        "lora.target_modules": sorted(config.lora.target_modules),
    }
    if config.model.name_or_path == "tiny":
        # The built-in model is built from these: another value is another base model.
        for key in ("tiny_layers", "tiny_hidden_size", "tiny_vocab_size", "tiny_seed"):
            record[f"model.{key}"] = getattr(config.model, key)
    record.update({f"env.{key}": value for key, value in config.env.objective_options().items()})
    return record


def checkpoint_to_resume(config: Config) -> CheckpointChoice:
    """The checkpoint `run.resume` goes on from, chosen before anything is loaded or written.
    Refuses a new run in a folder that holds another run (`refuse_another_run`), and a checkpoint
    written with another env, base model or LoRA shape."""
    if not config.run.resume:
        refuse_another_run(config.run.output_dir)
        return CheckpointChoice(None)
    choice = choose_checkpoint(config.run.output_dir)
    if choice.checkpoint is not None:
        refuse_another_config(choice.checkpoint, run_record(config))
    return choice


def start_or_resume(run: Run, choice: CheckpointChoice) -> tuple[dict[str, Any], int, bool]:
    """The trainer state (data positions, adapter version), the step to start from, and whether
    it comes from the checkpoint `choice` (`run.resume`)."""
    config, accelerator, learner = run.config, run.accelerator, run.learner
    state: dict[str, Any] = {"position": 0, "adapter_version": 0}
    step = 0
    if run.main:
        for line in choice.report():
            console.print(line, soft_wrap=True, markup=False, highlight=False)
    checkpoint = choice.checkpoint
    if config.run.resume and checkpoint is None and run.main:
        console.print(f"no checkpoint in {run.output_dir}/checkpoints: starting from scratch")
    if checkpoint is not None:
        state = load_checkpoint(
            checkpoint, learner.policy, learner.optimizer, learner.scheduler, accelerator
        )
        step = state.pop("step")
        state.pop(RUN_KEY, None)
        sync_adapter(
            run.backend, learner.policy, run.output_dir, state["adapter_version"], accelerator
        )
        if run.main:
            console.print(
                f"resumed from {checkpoint} (step {step})",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
    else:
        # Different sampling per process; set_seed in `build_run` made the LoRA init identical.
        set_seed(config.run.seed, device_specific=True)
    state.setdefault("env_positions", {})
    return state, step, checkpoint is not None


def start_logging(run: Run, step: int, resumed: bool) -> RunLogger:
    """The run's logger, its records after `step` dropped; the main process saves the config."""
    logger = RunLogger(run.config, run.output_dir, enabled=run.main, resume=resumed)
    logger.truncate_after(step)
    if run.main:
        run.output_dir.mkdir(parents=True, exist_ok=True)
        save_run_config(run.config, run.output_dir, step)
    return logger


def save_run_config(config: Config, output_dir: Path, step: int) -> None:
    """Write `config.yaml`. A different one already there (a resume with other settings) ran the
    steps up to `step`: it is kept as `config.until-step-NNNNNN.yaml`, and stderr names the keys
    that changed (those a resume may change: `run_record` holds the ones it may not)."""
    path = output_dir / "config.yaml"
    fresh = output_dir / ".config.yaml.tmp"
    save_config(config, fresh)
    earlier, now = config_values(path), config_values(fresh)
    if path.is_file() and earlier != now:
        kept = unused_name(output_dir, f"config.until-step-{step:06d}", ".yaml")
        path.rename(kept)
        changed = (
            "not readable"
            if earlier is None
            else ", ".join(
                f"{key} {json.dumps(before)} -> {json.dumps(after)}"
                for key, before, after in changed_keys(earlier, now)
            )
        )
        console.print(
            f"{path} had other settings ({changed}): kept as {kept}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
    os.replace(fresh, path)


def changed_keys(before: Any, after: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, before, after) for each value that differs between two config trees; a key
    one side lacks is None there."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            change
            for key in sorted(set(before) | set(after), key=str)
            for change in changed_keys(before.get(key), after.get(key), f"{prefix}{key}.")
        ]
    return [] if before == after else [(prefix.rstrip("."), before, after)]


def config_values(path: Path) -> Any:
    """A config file's values but `run.resume`, which tells how a run started, not what it runs;
    None for a file that cannot be read as YAML."""
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if isinstance(values, dict) and isinstance(values.get("run"), dict):
        values["run"].pop("resume", None)
    return values


def unused_name(folder: Path, stem: str, suffix: str) -> Path:
    """`folder/<stem><suffix>`, or with `-2`, `-3`... when taken: a kept file is never replaced."""
    path, number = folder / f"{stem}{suffix}", 1
    while path.exists():
        number += 1
        path = folder / f"{stem}-{number}{suffix}"
    return path


def evaluate_before(
    run: Run, resumed: bool
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]]]:
    """The summary and intervals of the evaluation before training (main process, when
    `run.eval_before`); a resumed run reads the ones it wrote when it started."""
    summaries: dict[str, dict[str, float]] = {}
    intervals: dict[str, dict[str, dict[str, float]]] = {}
    if not (run.config.run.eval_before and run.main):
        return summaries, intervals
    before_file = run.output_dir / "eval_before_summary.json"
    if before_file.is_file() and resumed:
        summaries["before"] = json.loads(before_file.read_text())
        intervals_file = run.output_dir / "eval_before_intervals.json"
        if intervals_file.is_file():
            intervals["before"] = json.loads(intervals_file.read_text())
        return summaries, intervals
    # The evaluation's sampling leaves the training's random draws as they would be without it.
    with torch.random.fork_rng():
        summaries["before"], intervals["before"], _ = evaluate(
            run.env, run.backend, run.tokenizer, run.config, run.output_dir, "eval_before"
        )
    print_summary(summaries, console, intervals)
    return summaries, intervals


class Rollouts:
    """The episodes of each step.

    With `rollout.overlap` the next step's episodes are sampled while this step updates, from
    the adapter one version behind (and the new one once it is loaded): staleness <= 1.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.view = composite(run.env)
        self.prefetch = ThreadPoolExecutor(max_workers=1) if run.config.rollout.overlap else None
        self.pending: Future | None = None

    def next(self, step: int, state: dict[str, Any]) -> Episodes:
        """The episodes of `step`, whose tasks start at `state`'s data positions."""
        per_step = self.run.config.grpo.tasks_per_step
        step_tasks, next_positions = self.draw(state["position"], state["env_positions"])
        if self.pending is not None:
            mine, groups, seconds = self.pending.result()
        else:
            mine, groups, seconds = self.roll_out(step_tasks)
        self.pending = None
        if self.prefetch is not None and step + 1 < self.run.config.run.max_steps:
            next_tasks, _ = self.draw(state["position"] + per_step, next_positions)
            self.pending = self.prefetch.submit(self.roll_out, next_tasks)
        return Episodes(mine, groups, seconds, next_positions)

    def draw(self, position: int, positions: dict[str, int]) -> tuple[list[Task], dict[str, int]]:
        """The step's tasks at global data `position` and the env data positions after them."""
        tasks = []
        for i in range(self.run.config.grpo.tasks_per_step):
            task, positions = self.view.train_task(
                position + i, positions, self.run.config.run.seed
            )
            tasks.append(task)
        return tasks, positions

    def roll_out(self, step_tasks: list[Task]) -> tuple[list[Task], list[Group], float]:
        """This process's share of the step's tasks, rolled out."""
        run = self.run
        started = time.perf_counter()
        mine = [step_tasks[i] for i in run.shard.tasks]
        groups = run_groups(
            run.env,
            mine,
            run.shard.samples,
            lambda task: Policy(
                run.backend, run.tokenizer, task.id, run.config.rollout.max_new_tokens
            ),
            max_concurrent=run.config.rollout.max_concurrent_episodes,
            progress=False,
        )
        return mine, groups, time.perf_counter() - started

    def close(self) -> None:
        if self.prefetch is not None:
            self.prefetch.shutdown()


def step_rows(run: Run, episodes: Episodes) -> list[Row]:
    """One row per trainable turn with its trajectory's advantage. Groups split over processes
    take their advantages over the whole group, from every process's rewards (`gather`)."""
    config, accelerator = run.config.grpo, run.accelerator
    groups = episodes.groups
    offset = accelerator.process_index * len(episodes.tasks) * run.shard.samples
    advantages = None
    if run.shard.samples < config.num_generations:
        rewards = torch.tensor([groups[0].rewards], dtype=torch.float64, device=accelerator.device)
        advantages = split_group_advantages(
            accelerator.gather(rewards),
            config.tasks_per_step,
            accelerator.process_index,
            config.scale_rewards,
            config.std_eps,
        )
    return rows_from_groups(
        groups,
        config.scale_rewards,
        config.std_eps,
        offset,
        advantages,
        per_role=config.advantages == "role",
        strata=[composite(run.env).member_name(group.task) for group in groups],
    )


def update_policy(run: Run, rows: list[Row]) -> tuple[dict[str, float], dict[str, float]]:
    """The update's losses and its `perf/` numbers: seconds, this process's trained rows and
    tokens (its rows' prompt and completion tokens) and their rate, and on CUDA the peak memory
    allocated during the update. The rollout backend gives its memory back for it."""
    device = run.accelerator.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    run.backend.release_memory()
    losses = run.learner.update(rows)
    run.backend.resume()
    seconds = time.perf_counter() - started
    tokens = sum(len(row.prompt_ids) + len(row.completion_ids) for row in rows)
    perf = {
        "perf/update_s": seconds,
        "perf/update_rows": float(len(rows)),
        "perf/update_tokens": float(tokens),
        "perf/update_tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
    }
    if device.type == "cuda":
        perf["perf/update_peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return losses, perf


def advance(run: Run, state: dict[str, Any], next_positions: dict[str, int]) -> float:
    """Move `state` past the step's tasks to the new adapter version and hand that to the rollout
    backend; returns the seconds the hand-over took."""
    state["position"] += run.config.grpo.tasks_per_step
    state["env_positions"] = next_positions
    state["adapter_version"] += 1
    return sync_adapter(
        run.backend, run.learner.policy, run.output_dir, state["adapter_version"], run.accelerator
    )


class StepLog:
    """Each step's metrics, reduced over the processes, to the progress bar and the run's logger."""

    def __init__(self, run: Run, logger: RunLogger, step: int) -> None:
        self.run = run
        self.logger = logger
        self.keys = metric_keys(run.env)
        self.labelled = composite(run.env).labelled()
        self.bar = tqdm(
            total=run.config.run.max_steps,
            initial=step,
            desc="GRPO steps",
            unit="step",
            disable=not run.main,
        )

    def record(
        self,
        step: int,
        groups: list[Group],
        rows: list[Row],
        losses: dict[str, float],
        perf: dict[str, float],
        started: float,
    ) -> dict[str, float]:
        """The step's episode statistics, learning signal (`rows`: its training rows), `losses`
        and timings (`perf`, and the whole step's since `started`), returned; logged, with
        sample turns, at the steps `logging` asks for."""
        run, logging = self.run, self.run.config.logging
        metrics = reduce_metric_sums(
            step_metrics(groups, run.env, rows), self.keys, run.accelerator, self.labelled
        )
        metrics.update(losses)
        metrics.update({**perf, "perf/step_s": time.perf_counter() - started})
        self.bar.update(1)
        reward = metrics.get("reward/total")
        postfix = {"reward": "n/a" if reward is None else f"{reward:.3f}"}
        postfix.update(progress_fields(metrics))
        postfix["step_s"] = f"{metrics['perf/step_s']:.1f}"
        failed = failed_episodes(metrics)
        if failed is not None:
            postfix["failed"] = failed
        self.bar.set_postfix(postfix)
        if step % logging.log_every == 0:
            self.logger.log(step, metrics)
        if logging.samples_every and step % logging.samples_every == 0:
            self.logger.log_samples(step, sample_rows(groups, run.tokenizer))
        return metrics

    def close(self) -> None:
        self.bar.close()


class FailedSteps:
    """Halts a run after `run.max_failed_steps` consecutive steps in which every episode failed
    (0: never): such a step trains on nothing (the judge down, every reply refused), so a run
    that goes on only looks alive."""

    MAX_REASON = 300
    """Characters of the last failure reason kept for the message, which stays one line."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0
        self.failed = ""
        self.reason = ""

    def halts_after(self, metrics: dict[str, float], groups: list[Group]) -> bool:
        """Whether the run stops after this step. `metrics` are summed over the processes, so
        every process decides alike; the reason is this process's last failed episode's."""
        episodes, failed = metrics["count/episodes"], metrics["judge/failed"]
        if not episodes or failed < episodes:
            self.streak = 0
            return False
        self.streak += 1
        self.failed = f"{failed:.0f} of {episodes:.0f}"
        reasons = [t.failed for g in groups for t in g.trajectories if t.failed]
        reason = " ".join(reasons[-1].split()) if reasons else "no reason recorded"
        if len(reason) > self.MAX_REASON:
            reason = reason[: self.MAX_REASON] + "..."
        self.reason = reason
        return 0 < self.limit <= self.streak

    def error(self, checkpoint: Path) -> RunHalted:
        return RunHalted(
            f"{self.failed} episodes failed in each of the last {self.streak} steps "
            f"({self.reason}); checkpoint {checkpoint} written: fix the judge, then resume with "
            "--run.resume true"
        )


def tiny_warmstart(config: Config) -> WarmstartConfig | None:
    """The warm-start a `no learning signal:` line names: the tiny model's, on or off (another
    model has none to name)."""
    return config.warmstart if config.model.name_or_path == "tiny" else None


def halt_after(
    run: Run,
    step: int,
    metrics: dict[str, float],
    groups: list[Group],
    failures: FailedSteps,
    signal: SignalWatch,
) -> RunHalted | None:
    """What ends the run after `step`, its checkpoint to be written: every episode failing
    (`FailedSteps`), or no learning signal with `run.stop_without_signal`; without that option
    the main process prints the `no learning signal:` line and the run goes on."""
    checkpoint = checkpoint_dir(run.output_dir, step)
    if failures.halts_after(metrics, groups):
        return failures.error(checkpoint)
    line = signal.observe(step, metrics)
    if line is None:
        return None
    if run.config.run.stop_without_signal:
        return RunHalted(f"{line}; checkpoint {checkpoint} written")
    if run.main:
        tqdm.write(line, file=sys.stderr)
    return None


def write_checkpoint(run: Run, step: int, state: dict[str, Any]) -> None:
    """The policy's adapter, the optimizer, the scheduler, the RNGs, the trainer `state` and the
    config values a resume must share (`run_record`)."""
    learner = run.learner
    save_checkpoint(
        run.output_dir,
        step,
        learner.policy,
        learner.optimizer,
        learner.scheduler,
        {**state, RUN_KEY: run_record(run.config)},
        run.accelerator,
        run.env_packages,
    )


def evaluate_after(
    run: Run,
    summaries: dict[str, dict[str, float]],
    intervals: dict[str, dict[str, dict[str, float]]],
) -> None:
    """The evaluation after training, the summary of both, and the figures (main process)."""
    env, output_dir = run.env, run.output_dir
    summaries["after"], intervals["after"], task_values = evaluate(
        env, run.backend, run.tokenizer, run.config, output_dir, "eval_after"
    )
    print_summary(summaries, console, intervals)
    (output_dir / "eval_summary.json").write_text(json.dumps(summaries, indent=2))
    changes = compare_before_after(run)
    rows = []
    if run.config.eval.degenerate_baselines:
        rows = compare_with_degenerate(run, summaries, intervals, task_values)
    view = composite(env)
    curve = plot_learning_curve(output_dir, summaries, view.labelled())
    console.print(f"learning curve: {curve}")
    if "before" in intervals:
        bars = plot_before_after(output_dir / "before_after.png", headline_panels(env, intervals))
        console.print(f"before / after: {bars}")
    headlines = {
        name: tuple(dict.fromkeys(("reward", e.headline_metric)))
        for name, e in view.members.items()
    }
    for line in verdict_lines(headlines, changes, rows):
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def compare_before_after(run: Run) -> list[before_after.Change]:
    """Print, write (`eval_before_after.json` and `.md`) and return each env's reward and
    metrics before and after training, paired task by task (`before_after`); nothing without a
    before evaluation."""
    before_file, after_file = (
        run.output_dir / f"eval_{when}.jsonl" for when in ("before", "after")
    )
    if not before_file.is_file():
        return []
    view = composite(run.env)
    # Keyed as `read_task_means` reads them: by member where members are labelled, else "".
    envs = {name if view.labels_members else "": env for name, env in view.members.items()}
    keys = tuple(
        dict.fromkeys(m for env in envs.values() for m in ("reward", *env.episode_metrics))
    )
    before, after = (
        before_after.read_task_means(path, keys, view.labels_members)
        for path in (before_file, after_file)
    )
    changes = [
        change
        for name, env in envs.items()
        for change in before_after.paired_changes(
            before.get(name, {}), after.get(name, {}), ("reward", *env.episode_metrics), name
        )
    ]
    table = before_after.markdown(changes)
    print_markdown(console, table)
    write_text(
        run.output_dir / "eval_before_after.json",
        json.dumps(before_after.as_json(changes), indent=2),
    )
    write_text(run.output_dir / "eval_before_after.md", table + "\n")
    return changes


def compare_with_degenerate(
    run: Run,
    summaries: dict[str, dict[str, float]],
    intervals: dict[str, dict[str, dict[str, float]]],
    task_values: dict[str, dict[str, dict[str, float]]],
) -> list[degenerate_gain.DegenerateGain]:
    """Print, write (`eval_vs_degenerate.json` and `.md`) and return the trained policy's held-out
    numbers against each env's best degenerate policy on the same tasks, paired task by task
    through `task_values` (`degenerate_gain`)."""
    env, config = run.env, run.config
    baselines = degenerate_baselines(
        env, eval_tasks(env, config), run.tokenizer, config.eval.seed, config.rollout.max_new_tokens
    )
    rows = degenerate_gain.gains(
        summaries, intervals, baselines, composite(env).labels_members, task_values
    )
    table = degenerate_gain.markdown(rows)
    print_markdown(console, table)
    write_text(
        run.output_dir / "eval_vs_degenerate.json",
        json.dumps(degenerate_gain.as_json(rows), indent=2),
    )
    write_text(run.output_dir / "eval_vs_degenerate.md", table + "\n")
    return rows


def train(config: Config) -> dict[str, dict[str, float]]:
    """GRPO steps up to `run.max_steps` (fewer after a SIGTERM); returns the evaluation summaries,
    `before` and `after`. Raises RunHalted, its checkpoint written, when every episode fails for
    `run.max_failed_steps` steps in a row (`FailedSteps`), or with `run.stop_without_signal`
    when the first `run.no_signal_steps` steps had no learning signal (`SignalWatch`)."""
    if config.rollout.backend == "openai":
        raise ConfigError(
            "`rollout.backend: openai` is for evaluation (`lexrl eval`, `lexrl rollout`): the "
            "endpoint's model has no weights here to train; use hf, vllm-server or vllm-engine"
        )
    choice = checkpoint_to_resume(config)
    accelerator = make_accelerator()
    choose_torch_threads(config.run.torch_threads, announce=accelerator.is_main_process)
    shard = step_shard(config, accelerator)
    refuse_if_cannot_fit(config, accelerator.num_processes, uses_deepspeed(accelerator))
    resolve_engine_memory(config, accelerator.num_processes)
    run = build_run(config, accelerator, shard)
    state, step, resumed = start_or_resume(run, choice)
    logger = start_logging(run, step, resumed)
    summaries, intervals = evaluate_before(run, resumed)
    accelerator.wait_for_everyone()

    rollouts = Rollouts(run)
    progress = StepLog(run, logger, step)
    failures = FailedSteps(config.run.max_failed_steps)
    signal = SignalWatch(config.run.no_signal_steps, step, tiny_warmstart(config))
    stop = StopRequest()
    stopping, halt = False, None
    while step < config.run.max_steps:
        started = time.perf_counter()
        episodes = rollouts.next(step, state)
        check_components(run.env, episodes.groups)
        rows = step_rows(run, episodes)
        losses, update_perf = update_policy(run, rows)
        step += 1
        sync_s = advance(run, state, episodes.next_positions)
        perf = {
            "perf/rollout_s": episodes.seconds,
            **update_perf,
            "perf/adapter_sync_s": sync_s,
        }
        metrics = progress.record(step, episodes.groups, rows, losses, perf, started)
        halt = halt_after(run, step, metrics, episodes.groups, failures, signal)
        stopping = stop.agreed(accelerator)
        last = step == config.run.max_steps or stopping or halt is not None
        if step % config.run.save_every == 0 or last:
            write_checkpoint(run, step, state)
        if stopping or halt is not None:
            break

    progress.close()
    stop.restore()
    rollouts.close()
    if halt is not None:
        logger.finish()
        raise halt
    if stopping and run.main:
        console.print(
            f"stopped by {stop.name} after step {step}, checkpoint written: continue with "
            "`--run.resume true`",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
    if config.run.eval_after and run.main and not stopping:
        evaluate_after(run, summaries, intervals)
    accelerator.wait_for_everyone()
    logger.finish()
    return summaries
