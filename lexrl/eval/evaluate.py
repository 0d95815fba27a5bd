"""Evaluate a policy on an env split: seeded rollouts, per-task JSONL, a summary table."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table
from transformers import PreTrainedTokenizerBase

from lexrl.config import Config
from lexrl.envs.base import Env
from lexrl.rollout.backend import Backend
from lexrl.rollout.engine import run_groups
from lexrl.rollout.policy import Policy
from lexrl.types import Group


def summarize(groups: list[Group]) -> dict[str, float]:
    """Means over every evaluated episode of the reward, its components and the env metrics."""
    trajectories = [t for g in groups for t in g.trajectories]
    if not trajectories:
        return {}
    summary = {
        "episodes": float(len(trajectories)),
        "reward": sum(t.reward for t in trajectories) / len(trajectories),
    }
    for source in ("components", "metrics"):
        keys = sorted({k for t in trajectories for k in getattr(t, source)})
        for key in keys:
            summary[key] = sum(getattr(t, source).get(key, 0.0) for t in trajectories) / len(
                trajectories
            )
    return summary


def evaluate(
    env: Env,
    backend: Backend,
    tokenizer: PreTrainedTokenizerBase,
    config: Config,
    out_dir: str | Path | None = None,
    name: str = "eval",
) -> dict[str, float]:
    """Run `eval.samples_per_task` seeded episodes on each task of `eval.split`.

    The same seed and policy give the same episodes, so a before/after comparison sees the same
    random draws. Writes `<out_dir>/<name>.jsonl` (one task a line, trajectories included) and
    `<out_dir>/<name>_summary.json`.
    """
    tasks = env.tasks(config.eval.split)
    if config.eval.max_tasks is not None:
        tasks = tasks[: config.eval.max_tasks]
    torch.manual_seed(config.eval.seed)
    groups = run_groups(
        env,
        tasks,
        config.eval.samples_per_task,
        lambda task: Policy(
            backend, tokenizer, task.id, config.rollout.max_new_tokens, greedy=config.eval.greedy
        ),
        max_concurrent=config.rollout.max_concurrent_episodes,
        description=name,
    )
    summary = summarize(groups)
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        with (out_dir / f"{name}.jsonl").open("w", encoding="utf-8") as file:
            for group in groups:
                record = {
                    "task": asdict(group.task),
                    "trajectories": [json.loads(t.to_json()) for t in group.trajectories],
                }
                file.write(json.dumps(record, ensure_ascii=False) + "\n")
        (out_dir / f"{name}_summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def print_summary(summaries: dict[str, dict[str, float]], console: Console | None = None) -> None:
    """One column per evaluated policy (e.g. before / after GRPO), one row per metric."""
    console = console or Console()
    table = Table(title="evaluation")
    table.add_column("metric")
    names = list(summaries)
    for name in names:
        table.add_column(name, justify="right")
    keys = list(dict.fromkeys(k for s in summaries.values() for k in s))
    for key in keys:
        table.add_row(key, *(f"{summaries[n].get(key, float('nan')):.4f}" for n in names))
    console.print(table)
