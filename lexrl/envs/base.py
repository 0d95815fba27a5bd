"""What every environment provides: tasks, an async multi-agent episode, and a scripted teacher."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from lexrl.envs.degenerate import PolicyFactory, generic_policies
from lexrl.rollout.policy import Policy, Teacher
from lexrl.types import Group, Task, Trajectory


@cache
def prompt_text(package: str, name: str) -> str:
    """The text of `prompts/<name>.txt` beside an env's package (`lexrl.envs.lexam`, ...)."""
    return (resources.files(package) / "prompts" / f"{name}.txt").read_text(encoding="utf-8")


def task_at(tasks: list[Task], position: int, seed: int) -> Task:
    """The task at a global data position: a fresh seeded permutation each epoch (resumable)."""
    epoch, offset = divmod(position, len(tasks))
    order = random.Random(seed * 1_000_003 + epoch).sample(range(len(tasks)), len(tasks))
    return tasks[order[offset]]


@dataclass
class ReportRequest:
    """What an evaluation asks of an env's report (set by `lexrl eval` from `eval.*`)."""

    split: str
    system: str
    """Name of the evaluated policy (its checkpoint, or `base`)."""
    out_dir: Path | None
    """Where the env may write its own per-task files (None: write nothing)."""
    bootstrap_resamples: int = 2000
    seed: int = 0
    baselines: bool = True
    """Score the env's baselines too (`lexrl eval`); the trainer's before/after evaluations skip
    them, as they do not change with the policy."""


@dataclass
class EnvReport:
    """An env's own part of an evaluation report."""

    data: dict[str, Any]
    """JSON-serialisable numbers (intervals as `{"mean", "low", "high"}`), saved under `env` in
    `eval_<split>_report.json`."""
    markdown: str
    """The same as Markdown tables, printed and appended to `eval_<split>_report.md`."""


@dataclass
class EnvPart:
    """One env's share of an evaluation or a training step: the env itself, or a member of a
    mixture with its own tasks and groups, as it made them."""

    name: str
    env: Env
    tasks: list[Task]
    groups: list[Group] | None


class Env(ABC):
    name: str
    headline_metric: str = "reward"
    """The episode metric that sums the env up in a mixture's report (`lexrl eval`)."""
    roles: tuple[str, ...]
    """Agent roles the policy plays (logged as agent/<role>/...)."""
    reward_components: tuple[str, ...] = ()
    """Names of the reward components every trajectory reports (logged as reward/<name>)."""
    episode_metrics: tuple[str, ...] = ()
    """Names of the non-reward numbers every trajectory reports (logged as env/<name>)."""
    actions: tuple[str, ...] = ()
    """The planner's discrete decisions, logged as agent/planner/action/<name> frequencies."""

    @abstractmethod
    def tasks(self, split: str) -> list[Task]:
        """The tasks of a split (`train`, `test`, ...)."""

    @abstractmethod
    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        """Play every agent through `policy` and return the finished Trajectory."""

    def train_task(
        self, position: int, positions: dict[str, int], seed: int
    ) -> tuple[Task, dict[str, int]]:
        """The training task at global data `position`, and the per-env data positions after
        it (a mixture's; a single env has none and returns `positions` as it is)."""
        return task_at(self.tasks("train"), position, seed), positions

    def member_envs(self) -> dict[str, Env]:
        """The envs of a mixture by name; empty for a single env."""
        return {}

    def member_of(self, task: Task) -> str:
        """The name of the env that made `task`: this one, or a mixture's member."""
        return self.name

    def parts(self, tasks: list[Task], groups: list[Group] | None) -> list[EnvPart]:
        """`tasks` and their `groups` by the env that made them: this env alone, or each member
        of a mixture."""
        return [EnvPart(self.name, self, tasks, groups)]

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """A scripted stand-in for the policy (warm-start data); envs without one raise."""
        raise NotImplementedError(f"env {self.name!r} has no scripted teacher for warm-start")

    def degenerate_policies(self) -> dict[str, PolicyFactory]:
        """The cheap strategies a policy could fall into, by name: scripted teachers whose replies
        ignore the task's content (`lexrl audit` scores them against `teacher`). The default
        fits any env; an env adds its own (`lexrl/envs/<env>/degenerate.py`)."""
        return generic_policies()

    def warmstart_tasks(self) -> list[Task]:
        """The tasks the scripted teacher plays for the supervised warm-start (`warmstart.*`):
        the training split, unless the env leaves some behaviour for GRPO to learn."""
        return self.tasks("train")

    def report(
        self, tasks: list[Task], groups: list[Group] | None, request: ReportRequest
    ) -> EnvReport | None:
        """The env's own part of an evaluation of `tasks`: a breakdown of the policy's `groups`
        (LEXam: accuracy by language) and baselines scored in the same run (statute: BM25 on the
        raw query). `groups` is None when only baselines are asked for (`eval.policy: false`).
        None when the episode means, which `lexrl eval` always reports, say it all."""
        return None

    def evaluation_label(self) -> str:
        """A word naming env settings that change an evaluation's numbers, put into the name of
        its output folder (statute: the final reranker's model); empty for none."""
        return ""

    def text_corpus(self) -> list[str]:
        """Text the built-in tiny model's tokenizer is trained on (prompts, documents, training
        questions). Never a test task: the test split must neither shape the model nor, when it
        changes size, rebuild it (a new tokenizer reorders token ids, so a new initial model)."""
        return []
