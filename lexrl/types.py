"""The data model every part of lexrl agrees on: Task, Turn, Trajectory, Group.

A Trajectory is one episode of a multi-agent workflow played by ONE policy. Each LLM call is a
Turn that keeps the exact token ids the sampler saw and produced, so the trainer scores the same
tokens. A Trajectory serialises to one JSON line and back without loss (`to_json` / `from_json`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Task:
    """One dataset item.

    `inputs` is what the env may show the agents; `gold` is what the reward compares against and
    never enters a prompt.
    """

    id: str
    inputs: dict[str, Any]
    gold: Any
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Turn:
    """One LLM call made during an episode."""

    role: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    """Sampler log-probs of `completion_ids`, one per token, under the sampling temperature."""
    text: str
    adapter_version: int
    trainable: bool = True
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if len(self.completion_ids) != len(self.logprobs):
            raise ValueError(
                f"Turn({self.role}): {len(self.completion_ids)} completion ids but "
                f"{len(self.logprobs)} log-probs"
            )


@dataclass
class Trajectory:
    """The Turns of one episode in order, its outcome and its reward."""

    task_id: str
    turns: list[Turn] = field(default_factory=list)
    outcome: Any = None
    reward: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    """Named reward components (`recall`, `coverage_gain`, `step_penalty`, ...); they sum to
    `reward` once weighted by the env."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """Per-step info for shaping and logging (the planner's action, the queries, ...)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Numbers to log that are not part of the reward (e.g. MAS-stage recall@14)."""
    role_rewards: dict[str, float] = field(default_factory=dict)
    """Each role's own reward, for workflows whose roles have different jobs (the argument env's
    arguer, analyst and polisher; a debate's opposing debaters). A role that acted but is not
    listed is credited with `reward`. Used by `grpo.advantages: role`; always logged as
    `agent/<role>/reward`."""
    failed: str | None = None
    """Why the episode has no reward (a judge that could not score it), or None. A failed
    trajectory gets no training row, its group's advantages are computed over the others, and
    the metrics count it (`judge/failed`) instead of averaging it as a 0."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        data = json.loads(line)
        data["turns"] = [Turn(**turn) for turn in data["turns"]]
        return cls(**data)


@dataclass
class Group:
    """The K trajectories of one task; the unit GRPO normalises rewards within."""

    task: Task
    trajectories: list[Trajectory]

    @property
    def rewards(self) -> list[float]:
        """The trajectories' rewards, NaN for a failed one (it has none)."""
        return [
            math.nan if trajectory.failed else trajectory.reward for trajectory in self.trajectories
        ]
