"""The held-out evaluations before and after training, paired task by task."""

import pytest

from lexrl.errors import DatasetError
from lexrl.eval.before_after import markdown, paired_changes, read_task_means
from lexrl.eval.evaluate import write_groups
from lexrl.types import Group, Task, Trajectory


def evaluation(rewards: dict[str, float], decisions: dict[str, float], env: str = "") -> list:
    meta = {"env": env} if env else {}
    return [
        Group(
            Task(task, {}, None, meta),
            [
                Trajectory(
                    task,
                    reward=reward,
                    metrics={"right_decision_mismatched": decisions[task]}
                    if task in decisions
                    else {},
                )
            ],
        )
        for task, reward in rewards.items()
    ]


def test_a_steady_rise_on_every_task_rises_and_a_metric_some_tasks_report_pairs_over_those(
    tmp_path,
):
    tasks = [f"t{i}" for i in range(30)]
    before = evaluation({t: i * 0.1 for i, t in enumerate(tasks)}, {"t0": 0.0, "t1": 0.0})
    after = evaluation({t: i * 0.1 + 0.05 for i, t in enumerate(tasks)}, {"t0": 1.0, "t1": 0.0})
    write_groups(before, tmp_path / "eval_before.jsonl")
    write_groups(after, tmp_path / "eval_after.jsonl")
    keys = ("reward", "right_decision_mismatched", "never_reported")
    read = [read_task_means(tmp_path / f"eval_{w}.jsonl", keys)[""] for w in ("before", "after")]

    changes = {c.metric: c for c in paired_changes(*read, keys)}
    assert set(changes) == {"reward", "right_decision_mismatched"}
    reward = changes["reward"]
    # The tasks spread from 0 to 2.9, so unpaired intervals would overlap; each task rose 0.05.
    assert reward.difference == pytest.approx({"mean": 0.05, "low": 0.05, "high": 0.05})
    assert (reward.tasks, reward.verdict) == (30, "rises")
    decision = changes["right_decision_mismatched"]
    assert (decision.tasks, decision.before, decision.after) == (2, 0.0, 0.5)
    assert decision.verdict == "unchanged"
    assert "| - | reward | 1.450 | 1.500 | +0.050 [+0.050, +0.050] | 30 | rises |" in markdown(
        list(changes.values())
    )


def test_a_mixture_is_read_per_member_env(tmp_path):
    groups = evaluation({"argument:1": 1.0}, {}, "argument") + evaluation(
        {"gdpr:1": 0.5}, {}, "gdpr"
    )
    write_groups(groups, tmp_path / "eval_after.jsonl")
    read = read_task_means(tmp_path / "eval_after.jsonl", ("reward",), mixture=True)
    assert read == {
        "argument": {"argument:1": {"reward": 1.0}},
        "gdpr": {"gdpr:1": {"reward": 0.5}},
    }


def test_a_line_that_is_not_an_evaluated_task_names_its_file_and_line(tmp_path):
    path = tmp_path / "eval_before.jsonl"
    write_groups(evaluation({"t0": 1.0}, {}), path)
    with path.open("a") as file:
        file.write('{"chunk": [1]}\n')
    with pytest.raises(DatasetError, match=r"eval_before.jsonl:2: not an evaluated task"):
        read_task_means(path, ("reward",))
