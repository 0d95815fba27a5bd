"""What every environment provides: tasks, an async multi-agent episode, and a scripted teacher."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any

from lexrl.rollout.policy import Policy, Teacher
from lexrl.types import Group, Task, Trajectory


class Env(ABC):
    name: str
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

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """A scripted stand-in for the policy (warm-start data); envs without one raise."""
        raise NotImplementedError(f"env {self.name!r} has no scripted teacher for warm-start")

    def report(self, groups: list[Group]) -> dict[str, Any] | None:
        """The env's own breakdown of an evaluation (e.g. accuracy by language, with intervals),
        added to `lexrl eval`'s report; None when the episode means say it all."""
        return None

    def text_corpus(self) -> list[str]:
        """Text the built-in tiny model's tokenizer is trained on (prompts, documents, questions)."""
        return []
