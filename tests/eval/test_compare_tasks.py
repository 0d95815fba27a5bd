"""`lexrl compare` checks that the reports cover the same tasks with the same samples per task
(from the report, else the per-task JSONL beside it), and ranks three or more reports."""

import json

import pytest

from lexrl.cli import main
from lexrl.errors import ConfigError, ReportError
from lexrl.eval.compare import compare_reports


def _write(
    tmp_path,
    name,
    ids=None,
    samples=1,
    mean=0.5,
    system="base",
    listed=False,
    count=True,
    envs=None,
    headline=None,
):
    """A report `eval_test_report.json` in folder `name` and, with `ids`, the per-task JSONL
    beside it (`samples` episodes a task); `listed` puts the ids in the report instead."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    report = {"env_name": "lexam", "split": "test", "system": system}
    if count and ids is not None:
        report["tasks"] = len(ids)
    if samples is not None:
        report["samples_per_task"] = samples
    episodes = float(len(ids or [0, 0]) * (samples or 1))
    if envs is None:
        report["summary"] = {"episodes": episodes, "reward": mean, "accuracy": mean}
        report["intervals"] = {"accuracy": {"mean": mean, "low": mean - 0.1, "high": mean + 0.1}}
        if headline:
            report["headline_metric"] = headline
    else:
        report["env_name"] = "mix"
        report["envs"] = {
            env: {
                "headline_metric": metric,
                "summary": {"episodes": episodes / len(envs), metric: value},
                "intervals": {metric: {"mean": value, "low": value - 0.1, "high": value + 0.1}},
            }
            for env, (metric, value) in envs.items()
        }
    if listed:
        report["task_ids"] = ids
    elif ids is not None:
        lines = [
            json.dumps({"task": {"id": task, "meta": {}}, "trajectories": [{}] * (samples or 1)})
            for task in ids
        ]
        (folder / "eval_test.jsonl").write_text("\n".join(lines) + "\n")
    path = folder / "eval_test_report.json"
    path.write_text(json.dumps(report))
    return path


def test_reports_of_different_tasks_are_refused_naming_the_counts_and_the_flag(tmp_path):
    a = _write(tmp_path, "a", ["t1", "t2"])
    b = _write(tmp_path, "b", ["t1", "t2", "t3"])
    with pytest.raises(ReportError) as refused:
        compare_reports([a, b])
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{a} (A) and {b} (B) evaluate different tasks: ")
    assert "0 tasks only in A, 1 only in B" in message
    assert "samples per task 1 in A and 1 in B" in message
    assert "--allow-different-tasks" in message


def test_allowed_different_tasks_compare_under_a_warning(tmp_path):
    a = _write(tmp_path, "a", ["t1", "t2"], mean=0.5)
    b = _write(tmp_path, "b", ["t1", "t3", "t4"], mean=0.7)
    markdown = compare_reports([a, b], allow_different_tasks=True)
    title, blank, warning = markdown.splitlines()[:3]
    assert title.startswith("# ") and blank == ""
    assert warning.startswith(f"> **Different tasks:** {b} (B) against {a} (A): ")
    assert "1 task only in A, 2 only in B" in warning
    assert "| accuracy | 0.5000 [0.400, 0.600] | 0.7000 [0.600, 0.800] | +0.2000 |" in markdown


def test_the_same_tasks_compare_as_before(tmp_path):
    a = _write(tmp_path, "a", ["t1", "t2"], mean=0.5)
    b = _write(tmp_path, "b", ["t2", "t1"], mean=0.55, listed=True)
    markdown = compare_reports([str(a), str(b)])
    assert "Different tasks" not in markdown and "not checked" not in markdown
    # The title names A first, as the command line does.
    assert markdown.startswith(f"# base ({a}) vs base ({b})\n\n| metric | A: base ({a}) |")
    assert "| accuracy | 0.5000 [0.400, 0.600] | 0.5500 [0.450, 0.650] | +0.0500 | yes |" in (
        markdown
    )


@pytest.mark.parametrize("listed", [False, True], ids=["jsonl", "report"])
def test_other_samples_per_task_are_caught(tmp_path, listed):
    a = _write(tmp_path, "a", ["t1", "t2"], samples=4, listed=listed)
    b = _write(tmp_path, "b", ["t1", "t2"], samples=2, listed=listed)
    with pytest.raises(
        ReportError,
        match="0 tasks only in A, 0 only in B, samples per task 4 in A "
        "and 2 in B; .*--allow-different-tasks",
    ):
        compare_reports([a, b])


def test_samples_per_task_are_read_from_the_jsonl_where_the_report_has_none(tmp_path):
    a = _write(tmp_path, "a", ["t1"], samples=None)
    b = _write(tmp_path, "b", ["t1"], samples=3)
    with pytest.raises(ReportError, match="samples per task 1 in A and 3 in B"):
        compare_reports([a, b])


def test_task_counts_alone_tell_different_tasks(tmp_path):
    # Neither report has ids; their `tasks` still differ.
    a = _write(tmp_path, "a", ["t1", "t2"], listed=True)
    b = _write(tmp_path, "b", ["t1", "t2", "t3"], listed=True)
    for path in (a, b):
        report = json.loads(path.read_text())
        del report["task_ids"]
        path.write_text(json.dumps(report))
    with pytest.raises(ReportError, match="2 tasks in A, 3 in B"):
        compare_reports([a, b])


def test_missing_task_information_is_a_warning_not_a_failure(tmp_path):
    a = _write(tmp_path, "a", ["t1", "t2"])
    b = _write(tmp_path, "b", None)
    markdown = compare_reports([a, b])
    (line,) = [line for line in markdown.splitlines() if "Tasks not checked" in line]
    assert line == (
        f"> **Tasks not checked:** {b} lists no task ids and has no eval_test.jsonl beside it; "
        "the reports may cover different tasks."
    )
    assert "| accuracy |" in markdown


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{not json\n", "line 1 of its eval_test.jsonl is not a task record"),
        ('{"task": {"id": "t1"}}\n', "its eval_test.jsonl holds 1 tasks, not the report's 2"),
        ("\n", "its eval_test.jsonl holds no tasks"),
    ],
    ids=["not_json", "stale", "empty"],
)
def test_an_unusable_jsonl_leaves_the_tasks_unchecked(tmp_path, content, said):
    a = _write(tmp_path, "a", ["t1", "t2"])
    b = _write(tmp_path, "b", ["t1", "t2"])
    (b.parent / "eval_test.jsonl").write_text(content)
    markdown = compare_reports([a, b])
    assert f"> **Tasks not checked:** {b} lists no task ids and {said}; " in markdown


def test_malformed_task_fields_are_data_errors_naming_the_key(tmp_path):
    a = _write(tmp_path, "a", ["t1"])
    for key, value, said in (
        ("task_ids", [1], "`task_ids` is [1], not a list of ids"),
        ("samples_per_task", 0, "`samples_per_task` is 0, not a count"),
        ("tasks", True, "`tasks` is true, not a count"),
    ):
        b = _write(tmp_path, f"b_{key}", ["t1"])
        report = json.loads(b.read_text())
        report[key] = value
        b.write_text(json.dumps(report))
        with pytest.raises(ReportError, match=f"^{b}: " + said.replace("[", r"\[")):
            compare_reports([a, b])


def test_three_reports_make_a_leaderboard_sorted_by_the_headline(tmp_path):
    ids = ["t1", "t2", "t3"]
    paths = [
        _write(tmp_path, "mini", ids, mean=0.6, system="gpt-4o-mini", headline="accuracy"),
        _write(tmp_path, "llama", ids, mean=0.4, system="llama-70b"),
        _write(tmp_path, "4o", ids, mean=0.8, system="gpt-4o"),
    ]
    markdown = compare_reports(paths)
    assert markdown.startswith("# Leaderboard of 3 reports (env lexam, test split)\n")
    assert "the reports cover 3 tasks, 1 sample per task." in markdown
    assert "| rank | system | accuracy [95% CI] | n | report |" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        f"| 1 | gpt-4o | 0.8000 [0.700, 0.900] | 3 | {paths[2]} |",
        f"| 2 | gpt-4o-mini | 0.6000 [0.500, 0.700] | 3 | {paths[0]} |",
        f"| 3 | llama-70b | 0.4000 [0.300, 0.500] | 3 | {paths[1]} |",
    ]


def test_a_leaderboard_without_a_headline_ranks_by_mean_reward(tmp_path):
    paths = [_write(tmp_path, str(mean), ["t1"], mean=mean) for mean in (0.2, 0.9, 0.5)]
    markdown = compare_reports(paths)
    assert "| rank | system | reward [95% CI] | n | report |" in markdown
    ranked = [line.split(" | ")[-1] for line in markdown.splitlines() if line.startswith("| ")]
    assert ranked[1:] == [f"{paths[1]} |", f"{paths[2]} |", f"{paths[0]} |"]


def test_a_report_given_twice_is_listed_once_with_a_note(tmp_path):
    first, second = (_write(tmp_path, str(m), ["t1"], mean=m) for m in (0.2, 0.9))
    markdown = compare_reports([first, second, first])
    # Two reports once each make a side-by-side comparison, not a leaderboard of three.
    assert not markdown.startswith("# Leaderboard")
    assert f"Note: {first} is the report of {first}: listed once." in markdown
    third = _write(tmp_path, "0.5", ["t1"], mean=0.5)
    markdown = compare_reports([first, second, third, tmp_path / "0.9"])
    ranked = [line.split(" | ")[-1] for line in markdown.splitlines() if line.startswith("| ")]
    assert ranked[1:] == [f"{second} |", f"{third} |", f"{first} |"]
    with pytest.raises(ConfigError, match="is every report given; nothing to compare"):
        compare_reports([first, first, first])


def test_a_leaderboard_of_mixtures_has_a_column_per_env(tmp_path):
    ids = ["gdpr:q1", "statute:s1"]
    paths = [
        _write(
            tmp_path, "a", ids, envs={"gdpr": ("accuracy", 0.5), "statute": ("mas_recall", 0.1)}
        ),
        _write(
            tmp_path, "b", ids, envs={"gdpr": ("accuracy", 0.9), "statute": ("mas_recall", 0.3)}
        ),
        _write(tmp_path, "c", ids, envs={"gdpr": ("accuracy", 0.7)}),
    ]
    markdown = compare_reports(paths)
    header = "| rank | system | mean of env headlines | n | gdpr: accuracy | statute: mas_recall |"
    assert header in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1].startswith("| 1 | base | 0.6000 | 2 | 0.9000 [0.800, 1.000] | 0.3000 [")
    assert rows[2].startswith("| 2 | base | 0.3000 | 2 | 0.5000 [0.400, 0.600] | ")
    # Without a statute mean it has no score: last.
    assert rows[3] == f"| 3 | base | - | 2 | 0.7000 [0.600, 0.800] | - | {paths[2]} |"


def test_a_leaderboard_refuses_and_allows_different_tasks_like_a_comparison(tmp_path):
    paths = [
        _write(tmp_path, "a", ["t1", "t2"]),
        _write(tmp_path, "b", ["t1", "t2"]),
        _write(tmp_path, "c", ["t1"]),
    ]
    with pytest.raises(ReportError, match=f"^{paths[0]} \\(A\\) and {paths[2]} \\(B\\) "):
        compare_reports(paths)
    markdown = compare_reports(paths, allow_different_tasks=True)
    (warning,) = [line for line in markdown.splitlines() if line.startswith("> ")]
    assert warning.startswith(f"> **Different tasks:** {paths[2]} (B) against {paths[0]} (A): ")
    assert markdown.count("| base |") == 3


def test_the_command_refuses_different_tasks_with_a_data_error(tmp_path, capsys):
    a = _write(tmp_path, "a", ["t1", "t2"])
    b = _write(tmp_path, "b", ["t1", "t2", "t3"])
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(a), str(b)])
    assert stop.value.code == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"data error: {a} (A) and {b} (B) evaluate different tasks: ")
    main(["compare", str(a), str(b), "--allow-different-tasks"])
    assert "> **Different tasks:** " in capsys.readouterr().out


def test_a_single_env_leaderboard_takes_the_headline_of_its_degenerate_baselines(tmp_path):
    # `lexrl eval` writes no `headline_metric` into a single env's report; its baselines' rows
    # name it.
    paths = [_write(tmp_path, name, ["t1"], mean=mean) for name, mean in (("a", 0.2), ("b", 0.9))]
    paths.append(_write(tmp_path, "c", ["t1"], mean=0.5))
    report = json.loads(paths[2].read_text())
    report["summary"]["reward"] = 2.0
    report["degenerate_baselines"] = [{"policy": "empty", "headline_metric": "accuracy"}]
    paths[2].write_text(json.dumps(report))
    markdown = compare_reports(paths)
    assert "| rank | system | accuracy [95% CI] | n | report |" in markdown
    ranked = [line.split(" | ")[-1] for line in markdown.splitlines() if line.startswith("| ")]
    assert ranked[1:] == [f"{paths[1]} |", f"{paths[2]} |", f"{paths[0]} |"]
