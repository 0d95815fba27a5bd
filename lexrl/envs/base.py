"""What every environment provides: tasks, an async multi-agent episode, and a scripted teacher."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from lexrl.envs.degenerate import TeacherFactory, generic_policies
from lexrl.policy import Policy, Teacher
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


STATS_SPLITS = ("train", "validation", "dev", "test")
"""The splits `Env.stats` looks for: train and test always (an error if missing), the others
where the env has them."""


def input_lengths(tasks: list[Task]) -> dict[str, float] | None:
    """Min / mean / max over `tasks` of the characters in a task's inputs (its string values as
    they are, any other value as its `str`); None for no tasks."""
    if not tasks:
        return None
    sizes = [sum(len(str(value)) for value in task.inputs.values()) for task in tasks]
    return {"min": min(sizes), "mean": round(sum(sizes) / len(sizes), 1), "max": max(sizes)}


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
    """An environment: a set of tasks and the multi-agent workflow that plays one of them, every
    agent through one policy, and scores it.

    Training, evaluation and the audit know nothing env-specific: they take tasks from `tasks`,
    play each through `run_episode` with a `Policy` handle, and log what the trajectories report
    under the names the env declares below. A new env derives this class and is built by its
    options class, registered under the env's name (`lexrl.registry.register_env`, what
    `env.type` selects); the Contributing page has the recipe.

    Required:

    - `name` and `roles`, set on the class or in `__init__`.
    - `tasks(split)`: the tasks of each split.
    - `run_episode(task, policy)`: one episode, written against `Policy.chat` and
      `Policy.finish`.

    Optional, with defaults that fit any single env:

    - `reward_components`, `episode_metrics`, `actions`, `headline_metric`: the names training
      logs and evaluations headline. Training logs only declared names (every process must sum
      the same keys): an episode metric or action left out here is computed but never logged,
      and a reward component left out stops training at its first step (an `env error`).
    - `teacher(task, rng)`: a scripted policy that answers right. Needed for the supervised
      warm-start (`warmstart.enabled`, the built-in `tiny` model) and as `lexrl audit`'s
      reference; without one those refuse or report no teacher.
    - `degenerate_policies()`: the content-free strategies the audit, and `lexrl eval`'s
      degenerate baselines, score against the teacher (default: `empty` and `echo`).
    - `text_corpus()`: what the `tiny` model's tokenizer is trained on; needed for
      `model.name_or_path: tiny`.
    - `warmstart_tasks()`: the tasks the warm-start plays (default: the training split).
    - `report(...)` and `evaluation_label()`: the env's own part of `lexrl eval`'s report.
    - `stats()`: what `lexrl envs NAME --stats` prints (default: roles, tasks per split, input
      lengths).

    Training and evaluation see every env through `lexrl.envs.composite`: a single env is a
    mixture of one (`lexrl.envs.mixture` is the mixture of several).
    """

    name: str
    """The name the env is registered under (what `env.type` selects): it names the env in
    logs, reports, audit rows and errors, and keys it among a mixture's members."""
    headline_metric: str = "reward"
    """The episode metric that sums the env up: one of `episode_metrics`, or `reward`. It heads
    a mixture's report (`lexrl eval`), ranks systems in `lexrl compare`, and is the audit's
    headline column and the evaluation figure's bars."""
    roles: tuple[str, ...]
    """Agent roles the policy plays: the `role` of its `chat` calls. Each is logged as
    `agent/<role>/turns`, `/tokens` and `/reward`; a role left out is played but not logged."""
    reward_components: tuple[str, ...] = ()
    """Names of the reward components every trajectory reports (`Policy.finish`'s
    `components`), logged as `reward/<name>`: the one declaration of them. A trajectory that
    reports a component not named here stops training with an `env error` naming the env and
    the component (`undeclared_components`)."""
    episode_metrics: tuple[str, ...] = ()
    """Names of the non-reward numbers trajectories report (`Policy.finish`'s `metrics`),
    logged as `env/<name>`, each averaged over the episodes that report it."""
    validity_metric: str | None = None
    """The episode metric that is 1 for an episode whose replies the env could parse (its answer
    line, its marker, its list) and 0 otherwise: training logs its mean per step as
    `signal/parsed`, the first number to read when a run does not learn. None: `parsed` when
    `episode_metrics` has it, else no such number (`validity_metric_name`)."""
    actions: tuple[str, ...] | dict[str, tuple[str, ...]] = ()
    """The discrete decisions agents take: the `action` of a `Trajectory.steps` entry, taken by
    the role the entry names under `role`, else by the lead role (`roles[0]`, the agent that
    runs the workflow: the statute env's planner). Each is logged as
    `agent/<role>/action/<name>`: its mean count per scored episode. A tuple names the lead
    role's decisions, a dict each role's (`role_actions`)."""

    @abstractmethod
    def tasks(self, split: str) -> list[Task]:
        """The tasks of `split`: `train` (what GRPO, the warm-start and `text_corpus` draw on),
        `test` (held out: `lexrl audit`'s, and `lexrl eval`'s by default), or any other split
        the env has (`eval.split`). The same list in the same order at every call: a training
        position indexes into it (`task_at`), so a resumed run plays the same tasks. Raises
        for a split the env does not have, naming those it has."""

    @abstractmethod
    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        """Play one episode of `task`: every agent through `policy` (`Policy.chat`, one call per
        LLM call, `role` naming the agent), then score it and return `Policy.finish`'s
        Trajectory, with `role_rewards` or `failed` set on it where they apply.

        The same code plays training rollouts, evaluations and, with a `ScriptedPolicy`, the
        teacher and the degenerate policies, so it must depend on nothing but `task` and the
        replies. Replies are arbitrary text (cut at the token cap, empty, malformed): parse
        them without raising. A reward that cannot be computed (a judge failed) sets
        `Trajectory.failed` rather than a made-up 0. Let `EpisodeCallFailed` from `chat`
        propagate: the engine records that episode as failed and the others go on; anything
        else raised ends the rollout."""

    def declared_components(self, task: Task) -> tuple[str, ...]:
        """The reward components an episode of `task` must report: `reward_components` (a
        mixture: its member's). The engine fails an episode that leaves one out."""
        return self.reward_components

    def validity_metric_name(self) -> str | None:
        """`validity_metric`, or `parsed` when the env reports an episode metric of that name."""
        if self.validity_metric is not None:
            return self.validity_metric
        return "parsed" if "parsed" in self.episode_metrics else None

    def teacher(self, task: Task, rng: random.Random) -> Teacher:
        """A scripted stand-in for the policy on `task`: the `Teacher` that answers every
        `chat` of one episode, in every role, as a policy doing the task right would (it may
        read `task.gold`). `rng` is for any random choice, seeded by the caller so runs repeat.

        Played through `run_episode` with a `ScriptedPolicy`, it is used for:

        - the supervised warm-start (`warmstart.enabled`, built-in `tiny` model): its episodes
          on `warmstart_tasks` are the SFT examples, so the policy learns the agents' formats
          before GRPO;
        - `lexrl audit` (and `lexrl eval`'s degenerate baselines): the reference row, whose
          reward each degenerate policy's is reported as a share of;
        - `lexrl plan`: the measured token counts of a scripted episode.

        Its replies should fit the env's token caps: the audit cuts them there as a sampled
        reply would be. The default, and an env for a task it cannot script (the gdpr env's
        live form), raises `NotImplementedError`. An env whose teacher cannot play its training
        tasks says so with an empty `warmstart_tasks`; the audit scores every row on the tasks
        the teacher can play, or, when it can play none, the degenerate policies alone."""
        raise NotImplementedError(f"env {self.name!r} has no scripted teacher for warm-start")

    def degenerate_policies(self) -> dict[str, TeacherFactory]:
        """The cheap strategies a policy could fall into, by name: `TeacherFactory`s making
        scripted teachers whose replies ignore the task's content (the first option, the
        longest answer, an empty reply). `lexrl audit` (on the test split) and `lexrl eval`'s
        degenerate baselines (on the evaluated tasks) play each through `run_episode` and report
        its mean reward as a share of `teacher`'s, marking one above
        `lexrl.eval.audit.SHARE_BOUND`: a reward a content-free policy earns most of is one
        GRPO would find. The default (`generic_policies`: `empty`, `echo`) fits any env; an env
        adds its own (`lexrl/envs/<env>/degenerate.py`). Whatever this returns, the audit and
        `lexrl eval` also play lexrl's generic probes on every env
        (`lexrl.envs.degenerate.generic_probes`: an unparsable reply, the prompt copied back,
        another task's or role's teacher reply, the most common teacher reply, half the
        teacher's), so an env need write no rule for those. A name starting with `random` is
        played over several seeds and averaged."""
        return generic_policies()

    def warmstart_tasks(self) -> list[Task]:
        """The tasks the scripted teacher plays for the supervised warm-start (`warmstart.*`,
        cycled through for `warmstart.num_episodes` episodes): the training split, unless the
        env leaves some behaviour for GRPO to learn or `teacher` cannot play them (empty: the
        warm-start refuses with a `ConfigError` asking for `warmstart.enabled: false`)."""
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

    def stats(self) -> dict[str, Any]:
        """What `lexrl envs NAME --stats` prints: the env's data at a glance. The default, which
        every env inherits: its roles and, per split (`STATS_SPLITS`, those the env has), the
        number of tasks and the min / mean / max length in characters of a task's inputs (what
        the first prompt is built from). A train or test split whose loading raises shows the
        error in one line instead, so a broken loader still gives a table. The built-in envs
        report their loaders' own counts."""
        out: dict[str, Any] = {"roles": list(getattr(self, "roles", ()))}
        for split in STATS_SPLITS:
            try:
                tasks = self.tasks(split)
            except Exception as error:  # a plugin's loader may raise anything: show it
                if split in ("train", "test"):
                    out[split] = {"error": f"{type(error).__name__}: {error}"}
                continue
            out[split] = {"tasks": len(tasks), "input_chars": input_lengths(tasks)}
        return out

    def text_corpus(self) -> list[str]:
        """Text the built-in `tiny` model's tokenizer is trained on (byte-level BPE,
        `lexrl.models.train_tokenizer`): the env's prompts, its documents, its training
        questions and answers. Used only with `model.name_or_path: tiny` (by training,
        `lexrl audit` and `lexrl plan`); any other model brings its own tokenizer.

        What it leaves out the tokenizer cannot spell in whole words. The default, empty, trains
        a tokenizer of single bytes (a prompt costs a token per byte), and the tokenizer that
        `lexrl audit` and `lexrl plan` load refuses it (`ValueError`), so an env meant to run on
        `tiny` returns its prompt files at least. The text is part of the tiny model's cache
        key: any change builds a new tokenizer and so a new initial model. Hence never a test
        task: the test split must neither shape the model nor, when it changes size, rebuild
        it."""
        return []


def lead_role(env: Env) -> str | None:
    """The role that runs the env's workflow, `roles[0]`: the one a `Trajectory.steps` entry's
    action is credited to when the entry names none (`Env.actions`); None without roles."""
    roles = tuple(getattr(env, "roles", ()))
    return roles[0] if roles else None


def role_actions(env: Env) -> dict[str, tuple[str, ...]]:
    """`Env.actions` by the role that takes them: a dict as it is, a tuple as the lead role's
    (`lead_role`); empty for an env without actions or roles."""
    declared = getattr(env, "actions", ())
    if isinstance(declared, dict):
        return {role: tuple(names) for role, names in declared.items()}
    lead = lead_role(env)
    return {lead: tuple(declared)} if declared and lead is not None else {}


def step_role(step: dict[str, Any], lead: str | None) -> str | None:
    """The role that took a `Trajectory.steps` entry's action: the one it names under `role`,
    else the lead role `lead` (`Env.roles[0]`; None: an env without roles)."""
    return step.get("role") or lead


def undeclared_components(env: Env, trajectories: list[Trajectory]) -> list[str]:
    """The reward components `trajectories` (scored, not failed) report that `env` does not
    declare (`Env.reward_components`), in the order first reported: never logged, as training
    logs declared names only."""
    declared = set(getattr(env, "reward_components", ()))
    reported = (name for t in trajectories if not t.failed for name in t.components)
    return [name for name in dict.fromkeys(reported) if name not in declared]
