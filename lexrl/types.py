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
    """One dataset item, as an env's `tasks(split)` returns it and `run_episode` plays it.

    `inputs` is what the env may show the agents; `gold` is what the reward compares against and
    never enters a prompt. An env makes its own Tasks; the rest of lexrl only reads `id` (to
    group, log and pair episodes) and passes the Task back to the env that made it.
    """

    id: str
    """Unique within the env's tasks (a mixture prefixes it: `<env>:<id>`). Every Trajectory of
    the task carries it as `task_id`, and evaluations pair systems task by task through it."""
    inputs: dict[str, Any]
    """What the env may show the agents (the question, its options, the case's facts, ...)."""
    gold: Any
    """What the reward is computed against (the gold label, articles, answer): never shown to
    an agent. The scripted teacher (`Env.teacher`) reads it to answer right."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Anything else the env keeps with the task (its source, language, system); a mixture adds
    `meta["env"]`, the member env that made it."""


@dataclass
class Turn:
    """One LLM call made during an episode, as `Policy.chat` (or `Policy.record`) recorded it.

    A trainable Turn becomes one training row: the trainer scores `completion_ids` after
    `prompt_ids` under the current weights at `temperature` and compares with `logprobs`.
    Constructing one raises `ValueError` when `completion_ids` and `logprobs` differ in length.
    """

    role: str
    """The agent that made the call (one of `Env.roles`, or an external judge's role)."""
    prompt_ids: list[int]
    """Token ids of the chat-templated prompt, ending with the assistant header: the policy's
    own rendering, or a chat endpoint's tokenization when it returns one; [] when neither is
    there (a chat endpoint without a local tokenizer)."""
    completion_ids: list[int]
    """Token ids of the reply as sampled (a scripted reply: encoded, then the end-of-sequence
    token); a chat endpoint's are whatever ids it returned, possibly []."""
    logprobs: list[float]
    """Sampler log-probs of `completion_ids`, one per token, under the sampling temperature
    (0.0 each for a scripted or recorded reply)."""
    text: str
    """The reply's text, as the env read it."""
    adapter_version: int
    """The adapter version the reply was sampled from; -1 for a reply the policy did not
    sample (a scripted teacher's, an external judge's)."""
    trainable: bool = True
    """False: kept for logs and samples only, never a training row (`chat(trainable=False)`,
    `Policy.record`)."""
    temperature: float = 1.0
    """The temperature the reply was sampled at, which the trainer divides the logits by; 1.0
    for a greedy reply."""

    def __post_init__(self) -> None:
        if len(self.completion_ids) != len(self.logprobs):
            raise ValueError(
                f"Turn({self.role}): {len(self.completion_ids)} completion ids but "
                f"{len(self.logprobs)} log-probs"
            )


@dataclass
class Trajectory:
    """The Turns of one episode in order, its outcome and its reward.

    `Policy` builds it: each `chat` appends a Turn and `finish` sets `outcome`, `components`,
    `reward`, `steps` and `metrics`. An env may then set `role_rewards` and `failed` on the
    Trajectory `finish` returned, before `run_episode` returns it.
    """

    task_id: str
    """The `Task.id` of the episode's task."""
    turns: list[Turn] = field(default_factory=list)
    """Every call of the episode in the order the replies came back, trainable or not."""
    outcome: Any = None
    """The episode's result as the env sees it (the ranked articles, the answer given): JSON-
    serialisable, read by the env's own report and by people, never by the trainer."""
    reward: float = 0.0
    """The episode's reward: the sum of `components` (`Policy.finish`). GRPO normalises it
    within the task's Group; every role that acted is credited with it unless `role_rewards`
    says otherwise. Meaningless when `failed` is set."""
    components: dict[str, float] = field(default_factory=dict)
    """Named reward components (`recall`, `coverage_gain`, `step_penalty`, ...), already weighted
    by the env, so they sum to `reward`. Logged as `reward/<name>` for each name in
    `Env.reward_components`."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """Per-step info for shaping and logging (the planner's action, the queries, ...); a step's
    `role`, where it names one, is the role whose `action` it records."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Numbers to log that are not part of the reward (e.g. MAS-stage recall@14), by name: logged
    as `env/<name>` for each name in `Env.episode_metrics`, averaged over the episodes that
    report it; evaluations report and compare every one."""
    role_rewards: dict[str, float] = field(default_factory=dict)
    """The role rewards: each role's own reward, for workflows whose roles have different jobs
    (the argument env's arguer, analyst and polisher; a debate's opposing debaters). A role that
    acted but is not listed is credited with `reward`. Used by `grpo.advantages: role` (each
    role's turns get the advantage of its own reward within the group); always logged as
    `agent/<role>/reward`. Empty: every role shares `reward`."""
    failed: str | None = None
    """Why the episode has no reward (a judge that could not score it), or None. A failed
    trajectory gets no training row, its group's advantages are computed over the others, and
    the metrics count it (`judge/failed`) instead of averaging it as a 0."""

    def to_json(self) -> str:
        """The trajectory as one JSON line: every field, Turns included, non-ASCII text as is.
        Raises `TypeError` when `outcome`, `steps` or `metrics` hold what JSON cannot encode."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        """The trajectory that `to_json` wrote as `line`. Raises `json.JSONDecodeError` (a
        `ValueError`) when `line` is not JSON, `TypeError` when its fields are not a
        Trajectory's or a Turn's, `ValueError` when a turn's ids and log-probs differ in length."""
        data = json.loads(line)
        data["turns"] = [Turn(**turn) for turn in data["turns"]]
        return cls(**data)


@dataclass
class Group:
    """The K trajectories of one task; the unit GRPO normalises rewards within.

    K episodes of the same Task played by the same policy (`grpo.num_generations` of them in
    training); each one's advantage is its reward against the others' (failed ones left out).
    """

    task: Task
    """The task all of them played."""
    trajectories: list[Trajectory]
    """The K episodes, in the order the rollout engine made them."""

    @property
    def rewards(self) -> list[float]:
        """The trajectories' rewards, NaN for a failed one (it has none)."""
        return [
            math.nan if trajectory.failed else trajectory.reward for trajectory in self.trajectories
        ]
