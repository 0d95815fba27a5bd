"""`lexrl audit`: how much of an env's reward a degenerate policy earns.

Each env declares the cheap strategies a policy could fall into (`Env.degenerate_policies`:
replies that ignore the task's content), and every env, plugins included, is played the generic
probes besides (`lexrl.envs.degenerate.generic_probes`: unparsable text, the prompt copied back,
another task's or another role's teacher reply, ...). The audit plays each of them, and the env's
scripted teacher, through the env's real workflow on the held-out tasks, and reports each one's
mean reward as a share of the teacher's: the teacher is the reward's upper reference, so a large
share means a policy can earn most of the reward without doing the task. A mixture is audited
member by member, each with its own policies.

A hole can hide in one reward component under a small total (an unparsable issue list scored
like an explicit "none" pays the issue component, while the rest of the reward pays nothing), so
each row also has each component's mean as a share of the teacher's, and a component paying a
content-free probe more than `COMPONENT_BOUND` of what it pays the teacher is flagged.

Given the run's tokenizer and `rollout.max_new_tokens`, every reply is cut at its call's token
cap as a sampled one would be (`ScriptedPolicy`), so a teacher whose replies do not fit the cap
is scored as a trained policy imitating it would be, and each row says what share of its replies
the cap cut. A policy with random choices is played over `RANDOM_SEEDS` seeds and averaged.

Before the audit, `lexrl audit` checks the env contract (`check`: `lexrl.envs.check.check_env`
on a few tasks of each split: unique task ids, episodes that finish, finite and declared reward
components, a deterministic reward, non-empty prompts), prints each problem above the table and
then ends with a `run error` (`refuse`): an audit of an env that breaks the contract measures
nothing worth reading.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

from transformers import PreTrainedTokenizerBase

from lexrl.envs.base import Env
from lexrl.envs.check import check_env
from lexrl.envs.composite import members
from lexrl.envs.degenerate import (
    CONTENT_FREE,
    ProbePolicy,
    ProbeUnplayable,
    TeacherFactory,
    generic_probes,
    teachable,
)
from lexrl.errors import EvaluationFailed
from lexrl.rollout.engine import run_groups
from lexrl.secrets import scrub
from lexrl.types import Task, Trajectory

TEACHER = "teacher"
SHARE_BOUND = 0.6
"""A degenerate policy earning more than this share of the teacher's reward is marked."""
COMPONENT_BOUND = 0.5
"""A reward component paying a content-free probe (`lexrl.envs.degenerate.CONTENT_FREE`) more
than this share of what it pays the teacher is flagged, whatever the total: a reply with nothing
of an answer in it should earn next to nothing of any part of the reward, and a component that
pays it half of the teacher's is one GRPO collects before it learns the task (the unparsable
issue list scored like "none" paid 46% of all issue credit while the total stayed at 16%)."""
RANDOM_SEEDS = 3
"""Seeds a policy named `random*` is played with; its row is the mean over them."""
CHECK_SPLITS = ("train", "test")
"""The splits `check` runs `lexrl.envs.check.check_env` on: the one training plays and the
one the audit plays."""
CHECK_TASKS = 3
"""Tasks of each split `check` plays (the first ones): enough to meet a broken rule of the
env contract, cheap beside the audit itself."""


@dataclass
class AuditRow:
    """One policy's numbers on one env's audited tasks."""

    env: str
    policy: str
    """`teacher`, or the name of one of the env's degenerate policies."""
    tasks: int
    failed: int
    """Episodes with no reward (`Trajectory.failed`), left out of the means."""
    mean_reward: float | None
    """Over the episodes that did not fail; None when all did."""
    share: float | None
    """`mean_reward` / the teacher's; None for the teacher itself, or without a positive
    teacher reward to compare with."""
    headline: float | None
    """The mean of the env's `headline_metric`, where the episodes report it."""
    headline_metric: str
    note: str = ""
    cut: float | None = None
    """Share of the policy's replies that the token cap cut (None when not played under one)."""
    task_values: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per task id, the mean reward and headline metric of its episodes that did not fail
    (`task_means`): what a trained policy is paired with, task by task (`degenerate_gain`)."""
    components: dict[str, float] = field(default_factory=dict)
    """Each reward component's mean (`Trajectory.components`) over the episodes that did not
    fail, an episode without it counting 0."""
    component_shares: dict[str, float] = field(default_factory=dict)
    """Each component's mean as a share of the teacher's, for the components whose teacher
    mean is positive (`set_shares`)."""
    flags: list[str] = field(default_factory=list)
    """The components paying this content-free probe more than `COMPONENT_BOUND` of the
    teacher's (`set_shares`)."""

    def as_json(self) -> dict:
        """The row's fields without `task_values`, for a report or a table."""
        row = asdict(self)
        del row["task_values"]
        return row


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def task_means(
    trajectories: list[Trajectory], keys: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """Per task id, the mean over its episodes that did not fail of each of `keys` that they
    report: `reward` (`Trajectory.reward`), an env metric (`Trajectory.metrics`) or a reward
    component (`Trajectory.components`; a metric of the same name wins, as in the summary)."""
    values: dict[str, dict[str, list[float]]] = {}
    for trajectory in trajectories:
        if trajectory.failed:
            continue
        task = values.setdefault(trajectory.task_id, {})
        for key in keys:
            if key == "reward":
                value = trajectory.reward
            else:
                value = trajectory.metrics.get(key, trajectory.components.get(key))
            if value is not None:
                task.setdefault(key, []).append(value)
    return {
        task: {key: sum(seen) / len(seen) for key, seen in keyed.items()}
        for task, keyed in values.items()
    }


def play(
    env: Env,
    tasks: list[Task],
    tokenizer: PreTrainedTokenizerBase | None,
    factory: TeacherFactory,
    seed: int,
    max_new_tokens: int | None = None,
) -> list[Trajectory]:
    """One episode per task, `factory`'s teacher answering for the policy in every role; with
    `max_new_tokens` (and a tokenizer) each reply cut at its call's cap. Raises
    `ProbeUnplayable` for a probe that cannot play `env`."""
    rng = random.Random(seed)
    groups = run_groups(
        env,
        tasks,
        1,
        lambda task: ProbePolicy(tokenizer, task.id, factory(task, rng), max_new_tokens),
        progress=False,
    )
    return [trajectory for group in groups for trajectory in group.trajectories]


def cut_share(trajectories: list[Trajectory], eos_token_id: int) -> float | None:
    """Share of the policy's turns that end without the end-of-sequence token: the cap cut
    them (None when there are none)."""
    turns = [turn for t in trajectories for turn in t.turns if turn.trainable]
    if not turns:
        return None
    return sum(
        not turn.completion_ids or turn.completion_ids[-1] != eos_token_id for turn in turns
    ) / len(turns)


def component_means(trajectories: list[Trajectory]) -> dict[str, float]:
    """Each reward component's mean over `trajectories` (those that did not fail), an episode
    that does not report a component counting 0 for it, as it does in the reward."""
    names = dict.fromkeys(name for t in trajectories for name in t.components)
    return {
        name: sum(t.components.get(name, 0.0) for t in trajectories) / len(trajectories)
        for name in names
    }


def score(env_name: str, metric: str, policy: str, trajectories: list[Trajectory]) -> AuditRow:
    """The row of `policy`'s episodes, its shares still to be set against the teacher's."""
    scored = [t for t in trajectories if not t.failed]
    return AuditRow(
        env=env_name,
        policy=policy,
        tasks=len(trajectories),
        failed=len(trajectories) - len(scored),
        mean_reward=_mean([t.reward for t in scored]),
        share=None,
        headline=_mean([t.metrics[metric] for t in scored if metric in t.metrics]),
        headline_metric=metric,
        task_values=task_means(trajectories, ("reward", metric)),
        components=component_means(scored),
    )


def _row(
    name: str,
    env: Env,
    tasks: list[Task],
    tokenizer: PreTrainedTokenizerBase | None,
    policy: str,
    factory: TeacherFactory,
    seed: int,
    max_new_tokens: int | None,
) -> AuditRow:
    """`policy`'s row: one play, or the mean over `RANDOM_SEEDS` plays for a random policy."""
    seeds = range(seed, seed + RANDOM_SEEDS) if policy.startswith("random") else [seed]
    trajectories = [
        t for s in seeds for t in play(env, tasks, tokenizer, factory, s, max_new_tokens)
    ]
    row = score(name, env.headline_metric, policy, trajectories)
    row.tasks = len(tasks)
    if max_new_tokens is not None and tokenizer is not None:
        row.cut = cut_share(trajectories, tokenizer.eos_token_id)
    if len(seeds) > 1:
        row.note = f"mean of {len(seeds)} seeds"
    return row


def audit_env(
    name: str,
    env: Env,
    tasks: list[Task],
    tokenizer: PreTrainedTokenizerBase | None,
    seed: int = 0,
    max_new_tokens: int | None = None,
) -> list[AuditRow]:
    """The teacher's row, then each degenerate policy's and generic probe's
    (`audited_policies`) with its shares of the teacher's reward and components, all on the
    tasks the teacher can play (the teacher row's note says so when that is not all of them, and
    names the probes left out). An env without a scripted teacher gets its policies' rewards on
    every task alone, and says so. With `max_new_tokens` every reply is cut at its call's cap
    (`play`)."""
    scored = teachable(env, tasks)
    note = ""
    if scored and len(scored) < len(tasks):
        note = f"plays {len(scored)} of {len(tasks)} tasks; every row is on those"
    if scored:
        teacher_row = _row(name, env, scored, tokenizer, TEACHER, env.teacher, seed, max_new_tokens)
    else:
        scored = tasks
        try:
            env.teacher(tasks[0], random.Random(seed))
            message = "no task to play"
        except NotImplementedError as error:
            message = str(error)
        metric = env.headline_metric
        teacher_row = AuditRow(name, TEACHER, len(tasks), 0, None, None, None, metric, message)
    rows = [teacher_row]
    policies, skipped = audited_policies(env, scored, seed)
    for policy, factory in policies.items():
        try:
            rows.append(_row(name, env, scored, tokenizer, policy, factory, seed, max_new_tokens))
        except ProbeUnplayable as error:
            skipped[policy] = str(error)
    notes = [teacher_row.note or note, left_out(skipped)]
    teacher_row.note = "; ".join(text for text in notes if text)
    return set_shares(rows)


def audited_policies(
    env: Env, tasks: list[Task], seed: int
) -> tuple[dict[str, TeacherFactory], dict[str, str]]:
    """The env's own degenerate policies, then each generic probe (`generic_probes`) it does not
    name itself; and the probes left out, each with why."""
    own = env.degenerate_policies()
    probes, skipped = generic_probes(env, tasks, seed)
    policies = {**own, **{name: probe for name, probe in probes.items() if name not in own}}
    return policies, {name: why for name, why in skipped.items() if name not in own}


def left_out(skipped: dict[str, str]) -> str:
    """The teacher row's note on the probes left out, grouped by why ("" for none)."""
    by_reason: dict[str, list[str]] = {}
    for name, why in skipped.items():
        by_reason.setdefault(why, []).append(name)
    return "; ".join(f"left out, {why}: {', '.join(names)}" for why, names in by_reason.items())


def share_of(mean_reward: float | None, reference: float | None) -> float | None:
    """`mean_reward` as a share of the teacher's `reference`; None without either, or when the
    reference is not positive: a ratio to a reward <= 0 has no meaning as a share (a teacher at
    -0.03 would put a policy at +1.0 at -3333%)."""
    if mean_reward is None or reference is None or reference <= 0:
        return None
    return mean_reward / reference


def teacher_reward(rows: list[AuditRow], env: str) -> float | None:
    """The mean reward of `env`'s teacher row in `rows` (None: no such row, or no reward)."""
    return next((r.mean_reward for r in rows if r.env == env and r.policy == TEACHER), None)


def teacher_components(rows: list[AuditRow], env: str) -> dict[str, float]:
    """The component means of `env`'s teacher row that are positive: those a share is taken of
    (a ratio to a mean <= 0 is no share, as in `share_of`)."""
    teacher = next((r for r in rows if r.env == env and r.policy == TEACHER), None)
    return {} if teacher is None else {k: v for k, v in teacher.components.items() if v > 0}


def set_shares(rows: list[AuditRow]) -> list[AuditRow]:
    """`rows`, each non-teacher row's `share` set against its env's teacher row (`share_of`),
    its `component_shares` against the teacher's positive component means, and its `flags`: a
    content-free probe's components above `COMPONENT_BOUND`."""
    for row in rows:
        if row.policy == TEACHER:
            continue
        row.share = share_of(row.mean_reward, teacher_reward(rows, row.env))
        if row.mean_reward is None:
            continue
        row.component_shares = {
            name: row.components.get(name, 0.0) / mean
            for name, mean in teacher_components(rows, row.env).items()
        }
        if row.policy in CONTENT_FREE:
            row.flags = [k for k, v in row.component_shares.items() if v > COMPONENT_BOUND]
    return rows


def audit(
    env: Env,
    tokenizer: PreTrainedTokenizerBase | None,
    max_tasks: int | None,
    seed: int = 0,
    max_new_tokens: int | None = None,
) -> list[AuditRow]:
    """Every env of `env` (each member of a mixture) on `max_tasks` of its test tasks (None: all
    of them), a sample seeded by `seed` (`sample_tasks`)."""
    rows = []
    for name, member in members(env).items():
        tasks = sample_tasks(member.tasks("test"), max_tasks, seed)
        rows += audit_env(name, member, tasks, tokenizer, seed, max_new_tokens)
    return rows


def sample_tasks(tasks: list[Task], count: int | None, seed: int) -> list[Task]:
    """`count` of `tasks` drawn at random with `seed`, kept in their order (all of them when
    `count` is None or not below their number). Not the first `count`: a file sorted by label
    puts one label first, and the audit then measures a constant answer on that label alone."""
    if count is None or count >= len(tasks):
        return tasks
    kept = sorted(random.Random(seed).sample(range(len(tasks)), count))
    return [tasks[index] for index in kept]


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _share(row: AuditRow, reference: float | None) -> str:
    """The share cell of `row`, its env's teacher earning `reference` (None: no teacher row, or
    one without a reward): `n/a` whenever that is not positive, whatever `row.share` holds."""
    if row.mean_reward is None:
        return "n/a"
    if reference is not None and reference <= 0:
        return "n/a (teacher's reward <= 0)"
    if row.policy == TEACHER:
        return "100%"
    share = row.share if reference is None else share_of(row.mean_reward, reference)
    if share is None:
        return "n/a (no teacher)"
    text = f"{share:.0%}"
    return f"**{text}** ⚠" if share > SHARE_BOUND else text


def markdown(rows: list[AuditRow]) -> str:
    """The rows as a Markdown table; shares above `SHARE_BOUND` in bold with a warning sign,
    `n/a` where the env's teacher earns no positive reward to take a share of."""
    lines = [
        "| env | policy | tasks | failed | mean reward | share of teacher | headline metric "
        "| replies cut |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        headline = f"{row.headline_metric} {_number(row.headline)}"
        policy = f"{row.policy} ({row.note})" if row.note else row.policy
        lines.append(
            f"| {row.env} | {policy} | {row.tasks} | {row.failed} | {_number(row.mean_reward)} "
            f"| {_share(row, teacher_reward(rows, row.env))} | {headline} | {_percent(row.cut)} |"
        )
    lines.append(
        f"\nShares of the scripted teacher's mean reward; above {SHARE_BOUND:.0%} in bold (⚠)."
    )
    components = component_markdown(rows)
    return "\n".join(lines) + (f"\n\n{components}" if components else "")


def _component_cell(row: AuditRow, name: str) -> str:
    share = row.component_shares.get(name)
    if share is None:
        return "n/a"
    return f"**{share:.0%}** ⚠" if name in row.flags else f"{share:.0%}"


def component_markdown(rows: list[AuditRow]) -> str:
    """Per env, a table of each row's reward components as shares of the teacher's mean of
    each (the teacher's row gives the means), for the components the teacher earns a positive
    mean of; a flagged one (`AuditRow.flags`) in bold with a warning sign. "" when no env has
    such a component."""
    tables = []
    for env in dict.fromkeys(row.env for row in rows):
        names = teacher_components(rows, env)
        if not names:
            continue
        lines = [
            f"| env | policy | {' | '.join(names)} |",
            f"|---|---|{'---:|' * len(names)}",
            f"| {env} | teacher (mean) | {' | '.join(_number(v) for v in names.values())} |",
        ]
        for row in rows:
            if row.env == env and row.policy != TEACHER:
                cells = " | ".join(_component_cell(row, name) for name in names)
                lines.append(f"| {env} | {row.policy} | {cells} |")
        tables.append("\n".join(lines))
    if not tables:
        return ""
    content_free = ", ".join(CONTENT_FREE)
    caption = (
        "Each reward component's mean as a share of the teacher's mean of it; a component "
        f"paying a content-free probe ({content_free}) more than {COMPONENT_BOUND:.0%} of "
        "what it pays the teacher in bold (⚠), whatever the total share."
    )
    return "\n\n".join([*tables, caption])


def check(
    env: Env,
    tokenizer: PreTrainedTokenizerBase | None,
    seed: int = 0,
    max_new_tokens: int | None = None,
    tasks: int = CHECK_TASKS,
) -> list[str]:
    """`lexrl.envs.check.check_env` of `env` (each member of a mixture) on the first `tasks`
    tasks of each of `CHECK_SPLITS`, replies cut as the audit cuts them: one line per broken
    rule of the env contract, each starting with its split; empty for an env that keeps it."""
    return [
        f"{split}: {problem}"
        for split in CHECK_SPLITS
        for problem in check_env(env, split, tasks, seed, tokenizer, max_new_tokens)
    ]


def check_markdown(problems: list[str]) -> str:
    """The env check's problems as lines to print above the audit's table ("" for none), with
    every key lexrl knows masked: a problem quotes the env's own exception."""
    if not problems:
        return ""
    count = f"{len(problems)} problem{'s' * (len(problems) > 1)}"
    lines = [f"**env check: {count}** ⚠ (the rows below may not stand for the env):"]
    return scrub("\n".join([*lines, *(f"- {problem}" for problem in problems)]))


def refuse(problems: list[str]) -> None:
    """`EvaluationFailed` (a `run error`, exit 9) when the env check found a problem: as with
    too many failed episodes in `lexrl eval`, the report is printed, but its numbers do not
    stand for the env until the env is fixed."""
    if problems:
        count = f"{len(problems)} problem{'s' * (len(problems) > 1)}"
        raise EvaluationFailed(
            f"env check: {count}, first: {problems[0]}; the list is above the audit's table "
            "(`lexrl.envs.check.check_env` checks the env contract): fix the env, then run "
            "the same command again"
        )
