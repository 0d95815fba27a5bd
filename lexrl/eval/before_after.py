"""What training changed, task by task: the held-out evaluation before training against the one
after, paired on the tasks both played.

`lexrl train` evaluates the untrained policy and the trained one on the same held-out tasks
(`eval_before.jsonl`, `eval_after.jsonl`). Each metric's change is then the mean of the per-task
differences with its percentile-bootstrap 95% interval, tasks resampled (the paired bootstrap of
Koehn 2004, "Statistical Significance Tests for Machine Translation Evaluation"): what a task's
difficulty adds to both sides cancels, so a change the two unpaired intervals would hide can show.
A metric only some tasks report (the argument env's `right_decision_<kind>`) is paired over those.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lexrl.bootstrap import mean_with_ci
from lexrl.errors import DatasetError
from lexrl.eval.audit import task_means
from lexrl.types import Trajectory


@dataclass
class Change:
    """One metric of one env, before and after, over the tasks both evaluations report it on."""

    env: str
    """The member env of a mixture (`Task.meta["env"]`); "" for a single env."""
    metric: str
    before: float
    """The mean over the paired tasks before training."""
    after: float
    difference: dict[str, float]
    """{mean, low, high}: the mean per-task difference after - before and its 95% interval."""
    tasks: int

    @property
    def verdict(self) -> str:
        """`rises` / `falls` when the interval lies above / below 0, else `unchanged`."""
        if self.difference["low"] > 0:
            return "rises"
        if self.difference["high"] < 0:
            return "falls"
        return "unchanged"


def read_task_means(
    path: Path, keys: tuple[str, ...], mixture: bool = False
) -> dict[str, dict[str, dict[str, float]]]:
    """Per env and task id, the means of `keys` over the task's episodes that did not fail
    (`task_means`), from an evaluation's `<name>.jsonl` (one task a line, as `write_groups`
    writes it). A mixture's tasks are under their member env (`Task.meta["env"]`), a single
    env's all under "". Raises DatasetError naming the file and line of a record that is not
    one."""
    trajectories: dict[str, list[Trajectory]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                env = record["task"]["meta"]["env"] if mixture else ""
                played = [Trajectory.from_json(json.dumps(t)) for t in record["trajectories"]]
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                raise DatasetError(f"{path}:{number}: not an evaluated task ({error})") from error
            trajectories.setdefault(env, []).extend(played)
    return {env: task_means(played, keys) for env, played in trajectories.items()}


def paired_changes(
    before: dict[str, dict[str, float]],
    after: dict[str, dict[str, float]],
    metrics: tuple[str, ...],
    env: str = "",
) -> list[Change]:
    """For each of `metrics` that a task reports on both sides (`before[task][metric]`,
    `after[task][metric]`, as `read_task_means` gives them for one env): its paired `Change`.
    A metric no task reports on both sides is left out."""
    changes = []
    for metric in metrics:
        pairs = [
            (values[metric], after[task][metric])
            for task, values in before.items()
            if metric in values and metric in after.get(task, {})
        ]
        if not pairs:
            continue
        changes.append(
            Change(
                env=env,
                metric=metric,
                before=sum(b for b, _ in pairs) / len(pairs),
                after=sum(a for _, a in pairs) / len(pairs),
                difference=mean_with_ci([a - b for b, a in pairs]),
                tasks=len(pairs),
            )
        )
    return changes


def markdown(changes: list[Change]) -> str:
    """The changes as a Markdown table with a line on how to read it."""
    lines = [
        "| env | metric | before | after | after - before [95% CI] | tasks | change |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for change in changes:
        difference = change.difference
        lines.append(
            f"| {change.env or '-'} | {change.metric} | {change.before:.3f} | {change.after:.3f} "
            f"| {difference['mean']:+.3f} [{difference['low']:+.3f}, {difference['high']:+.3f}] "
            f"| {change.tasks} | {change.verdict} |"
        )
    lines.append(
        "\nHeld-out means before and after training over the tasks both evaluations report the "
        "metric on; the interval is that of the mean per-task difference, tasks resampled "
        "(paired bootstrap). `rises` / `falls`: it lies above / below 0."
    )
    return "\n".join(lines)


def as_json(changes: list[Change]) -> list[dict]:
    return [{**asdict(change), "verdict": change.verdict} for change in changes]
