import io

import pytest
from rich.console import Console

from lexrl.eval.evaluate import print_summary, summarize, summary_intervals
from lexrl.types import Group, Task, Trajectory


def group(task_id, rewards, failed=()):
    return Group(
        Task(task_id, {}, None),
        [
            Trajectory(
                task_id, reward=r, metrics={"accuracy": r}, failed="judge" if i in failed else None
            )
            for i, r in enumerate(rewards)
        ],
    )


def test_intervals_resample_tasks_and_leave_failed_episodes_out():
    groups = [
        group("a", [1.0, 1.0, 0.0], failed=(2,)),
        group("b", [0.0, 0.0]),
        group("c", [1.0, 0.0]),
    ]
    intervals = summary_intervals(groups)
    assert intervals["accuracy"]["mean"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert 0.0 <= intervals["accuracy"]["low"] < intervals["accuracy"]["mean"]
    assert intervals["accuracy"]["mean"] < intervals["accuracy"]["high"] <= 1.0
    summary = summarize(groups)
    assert summary["failed_episodes"] == 1 and summary["reward"] == pytest.approx(3 / 6)


def test_a_metric_is_averaged_over_the_episodes_that_report_it():
    """One evaluation may mix systems: the debate env's single-agent episodes have no
    debaters, so `x_accuracy` is the mean over the debate episodes, not diluted by zeros."""
    debate = Trajectory("d", reward=1.0, metrics={"accuracy": 1.0, "x_accuracy": 0.5})
    single = Trajectory("s", reward=0.0, metrics={"accuracy": 0.0})
    groups = [Group(Task("d", {}, None), [debate]), Group(Task("s", {}, None), [single])]
    summary = summarize(groups)
    assert summary["accuracy"] == 0.5 and summary["x_accuracy"] == 0.5
    assert summary_intervals(groups)["x_accuracy"]["mean"] == 0.5


def test_the_table_shows_each_mean_with_its_interval():
    groups = [group("a", [1.0]), group("b", [0.0])]
    out = io.StringIO()
    print_summary(
        {"after": summarize(groups)},
        Console(file=out, width=200),
        {"after": summary_intervals(groups)},
    )
    assert "0.5000 [0.000, 1.000]" in out.getvalue()
