"""Did training beat the cheapest way to earn the reward?

A trained policy's rise over its untrained self says little when a content-free reply (always
abstain, always "Yes", the majority label) earns as much: training may simply have found that
shortcut. This compares the held-out evaluation after training with the best of each env's
degenerate policies (`lexrl.eval.audit`), played on the same tasks, on the reward and on the
env's headline metric, and says whether the trained policy is above it with 95% confidence.

Both policies play the same tasks, so where each task's values are known the comparison is
paired (the paired bootstrap of Koehn 2004, "Statistical Significance Tests for Machine
Translation Evaluation"): the interval is that of the mean of the per-task differences, tasks
resampled. The baseline's mean is then an estimate on those tasks like the policy's, not a fixed
line, and what the two share (a task's difficulty) cancels. Without per-task values the trained
policy's own interval is set against the baseline's mean.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from lexrl.bootstrap import mean_with_ci
from lexrl.eval.audit import TEACHER, AuditRow

BEATS = "yes"
WITHIN = "within the interval"
LOSES = "no"
NAMED = 4
"""The table names at most this many degenerate policies the trained one does not beat (the JSON
has every one)."""


@dataclass
class DegenerateGain:
    """One measure of one env: the trained policy against the best degenerate policy."""

    env: str
    measure: str
    """`reward` or the env's headline metric."""
    before: float | None
    after: float
    after_low: float | None
    """The lower end of the after value's 95% interval (None without one)."""
    best_policy: str | None
    """The degenerate policy with the highest value of `measure` (None: none reports it)."""
    best_value: float | None
    tied: int
    """How many other degenerate policies have `best_value` too."""
    teacher: float | None
    """The scripted teacher's value on the same tasks, the upper reference."""
    paired: dict[str, float] | None = None
    """{mean, low, high}: the mean over the tasks both played of the trained policy's value
    minus the best degenerate policy's, with its 95% interval (None: no task values)."""
    paired_tasks: int = 0
    """How many tasks `paired` is over."""
    each: list[PolicyVerdict] = field(default_factory=list)
    """The same paired comparison against every degenerate policy, not only the best: a
    policy with a lower mean may still share more of a task's difficulty with the trained one."""

    @property
    def gain(self) -> float | None:
        return None if self.best_value is None else self.after - self.best_value

    @property
    def verdict(self) -> str:
        """Paired (`paired`, over 2 tasks or more): `yes` when the difference's interval lies
        above 0, `within the interval` when only its mean does, `no` otherwise. Unpaired: the
        same of the after value's interval against the best degenerate value. `n/a` without a
        degenerate value."""
        if self.best_value is None:
            return "n/a"
        if self.paired is not None and self.paired_tasks >= 2:
            return _verdict(self.paired["mean"], self.paired["low"])
        mean = self.after - self.best_value
        low = mean if self.after_low is None else self.after_low - self.best_value
        return _verdict(mean, low)

    @property
    def not_beaten(self) -> list[str]:
        """The degenerate policies of `each` whose paired verdict is not `yes`."""
        return [row.policy for row in self.each if row.verdict != BEATS]


@dataclass
class PolicyVerdict:
    """The trained policy against one degenerate policy on one measure, paired task by task."""

    policy: str
    value: float
    """The degenerate policy's mean over the paired tasks."""
    paired: dict[str, float]
    """{mean, low, high}: the trained policy's value minus this policy's, per task."""
    tasks: int

    @property
    def verdict(self) -> str:
        """As `DegenerateGain.verdict`, paired; `n/a` under 2 tasks."""
        if self.tasks < 2:
            return "n/a"
        return _verdict(self.paired["mean"], self.paired["low"])


def _verdict(mean: float, low: float) -> str:
    if mean <= 0:
        return LOSES
    return BEATS if low > 0 else WITHIN


def against_each(
    after: dict[str, dict[str, float]], audit_rows: list[AuditRow], measure: str
) -> list[PolicyVerdict]:
    """The trained policy's per-task values (`after[task][measure]`) against each degenerate
    policy of `audit_rows` (the teacher left out) on the tasks both played, paired."""
    verdicts = []
    for row in audit_rows:
        if row.policy == TEACHER:
            continue
        paired, tasks = paired_difference(after, row.task_values, measure)
        if paired is None:
            continue
        shared = [
            values[measure]
            for task, values in row.task_values.items()
            if measure in values and measure in after.get(task, {})
        ]
        verdicts.append(PolicyVerdict(row.policy, sum(shared) / len(shared), paired, tasks))
    return verdicts


def _value(row: AuditRow, measure: str) -> float | None:
    return row.mean_reward if measure == "reward" else row.headline


def paired_difference(
    after: dict[str, dict[str, float]], baseline: dict[str, dict[str, float]], measure: str
) -> tuple[dict[str, float] | None, int]:
    """The mean of `after[task][measure] - baseline[task][measure]` over the tasks where both
    have it, with its percentile-bootstrap 95% interval (`mean_with_ci`), and the task count;
    (None, 0) without a common task."""
    differences = [
        values[measure] - baseline[task][measure]
        for task, values in after.items()
        if measure in values and measure in baseline.get(task, {})
    ]
    if not differences:
        return None, 0
    return mean_with_ci(differences), len(differences)


def gains(
    summaries: dict[str, dict[str, float]],
    intervals: dict[str, dict[str, dict[str, float]]],
    baselines: dict[str, list[AuditRow]],
    mixture: bool,
    task_values: dict[str, dict[str, dict[str, float]]] | None = None,
) -> list[DegenerateGain]:
    """For each env of `baselines` (by env name, as `degenerate_baselines` returns them) and
    each of reward and its headline metric: the `after` evaluation (`summaries["after"]`, a
    mixture's keys prefixed `<env>/`) against the best degenerate policy on the same tasks,
    paired task by task when `task_values` (the after evaluation's per-task means by env name
    and task id, as `env_task_means` returns them) is given."""
    rows = []
    for env, audit_rows in baselines.items():
        if not audit_rows:
            continue
        headline = audit_rows[0].headline_metric
        for measure in dict.fromkeys(("reward", headline)):
            key = f"{env}/{measure}" if mixture else measure
            after = summaries.get("after", {}).get(key)
            if after is None:
                continue
            teacher = next((r for r in audit_rows if r.policy == TEACHER), None)
            scored = [
                (value, row.policy)
                for row in audit_rows
                if row.policy != TEACHER and (value := _value(row, measure)) is not None
            ]
            best_value, best_policy = max(scored) if scored else (None, None)
            best_row = next((r for r in audit_rows if r.policy == best_policy), None)
            paired, paired_tasks, each = (None, 0, [])
            if task_values and env in task_values and best_row is not None:
                paired, paired_tasks = paired_difference(
                    task_values[env], best_row.task_values, measure
                )
                each = against_each(task_values[env], audit_rows, measure)
            rows.append(
                DegenerateGain(
                    env=env,
                    measure=measure,
                    before=summaries.get("before", {}).get(key),
                    after=after,
                    after_low=intervals.get("after", {}).get(key, {}).get("low"),
                    best_policy=best_policy,
                    best_value=best_value,
                    tied=sum(value == best_value for value, _ in scored) - 1 if scored else 0,
                    teacher=None if teacher is None else _value(teacher, measure),
                    paired=paired,
                    paired_tasks=paired_tasks,
                    each=each,
                )
            )
    return rows


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown(rows: list[DegenerateGain], policy: str = "") -> str:
    """The rows as a Markdown table with a line on how to read it: the policy after training,
    or, given `policy`, that evaluated policy (`lexrl eval`: the base model, a checkpoint, a
    served model), whose means are the `after` column."""
    lines = [
        "| env | measure | before | after | best degenerate policy | its value | after - it "
        "| paired [95% CI] (tasks) | beats it | beats each | teacher |",
        "|---|---|---:|---:|---|---:|---:|---|---|---|---:|",
    ]
    for row in rows:
        gain = "n/a" if row.gain is None else f"{row.gain:+.3f}"
        best = row.best_policy or "n/a"
        if row.tied:
            best += f" (and {row.tied} tied)"
        paired = "n/a"
        if row.paired is not None:
            low, high = row.paired["low"], row.paired["high"]
            paired = f"{row.paired['mean']:+.3f} [{low:+.3f}, {high:+.3f}] ({row.paired_tasks})"
        lines.append(
            f"| {row.env} | {row.measure} | {_number(row.before)} | {_number(row.after)} "
            f"| {best} | {_number(row.best_value)} | {gain} | {paired} "
            f"| {row.verdict} | {_beats_each(row)} | {_number(row.teacher)} |"
        )
    evaluated = f"of {policy}, the `after` column," if policy else "after training"
    difference = (
        "its value minus that policy's" if policy else "the trained policy's value minus it"
    )
    lines.append(
        f"\nHeld-out means {evaluated} against the best degenerate policy on the same tasks "
        f"(`lexrl audit`); `{BEATS}`: the 95% interval of {difference}, "
        "paired task by task, lies above 0 (without per-task values: the after value's interval "
        "lies above it). `beats each`: of the degenerate policies, how many it beats so, paired; "
        "the others are named."
    )
    return "\n".join(lines)


def _beats_each(row: DegenerateGain) -> str:
    if not row.each:
        return "n/a"
    beaten = len(row.each) - len(row.not_beaten)
    text = f"{beaten} of {len(row.each)}"
    if not row.not_beaten:
        return text
    named = ", ".join(row.not_beaten[:NAMED])
    more = len(row.not_beaten) - NAMED
    return f"{text} (not: {named}{f' and {more} more' if more > 0 else ''})"


def as_json(rows: list[DegenerateGain]) -> list[dict]:
    return [
        {
            **asdict(row),
            "each": [{**asdict(each), "verdict": each.verdict} for each in row.each],
            "gain": row.gain,
            "verdict": row.verdict,
        }
        for row in rows
    ]
