"""Fuzzing `lexrl compare`: any two or three report files (report-shaped JSON with any values,
any JSON, any bytes), each with or without a per-task JSONL beside it (task records, any JSON,
any bytes), are compared into a table or leaderboard or refused with a `LexrlError` (one
`<kind> error` line), never another exception. The examples are derandomized, so CI sees the
same ones on every run.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lexrl.errors import LexrlError
from lexrl.eval.compare import compare_reports

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
RARELY = st.sampled_from([False] * 7 + [True])


def mostly(usual: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    return RARELY.flatmap(lambda spoil: rare if spoil else usual)


METRICS = st.sampled_from(["episodes", "reward", "accuracy", "recall@5"])
TASK_IDS = st.sampled_from(["t1", "t2", "gdpr:t1"])
NUMBERS = mostly(st.floats() | st.integers(-(10**6), 10**6), st.integers(10**308, 10**400))
INTERVAL = st.fixed_dictionaries({"mean": NUMBERS, "low": NUMBERS, "high": NUMBERS})


def entry() -> st.SearchStrategy[dict]:
    """One env's part: a summary of means and their intervals, each part rarely any JSON."""
    return st.fixed_dictionaries(
        {"summary": mostly(st.dictionaries(METRICS, mostly(NUMBERS, JSON)), JSON)},
        optional={"intervals": mostly(st.dictionaries(METRICS, mostly(INTERVAL, JSON)), JSON)},
    )


REPORT = st.one_of(
    entry(),
    st.fixed_dictionaries(
        {"envs": st.dictionaries(st.sampled_from(["gdpr", "lexam"]), entry(), min_size=1)}
    ),
).flatmap(
    lambda report: st.fixed_dictionaries(
        # Mostly one split: reports of different splits are refused before their tasks are read.
        {
            **{key: st.just(value) for key, value in report.items()},
            "split": mostly(st.just("test"), JSON),
        },
        optional={
            "env_name": mostly(st.just("lexam"), JSON),
            "system": JSON,
            "tasks": mostly(st.integers(0, 3), JSON),
            "samples_per_task": mostly(st.integers(1, 3), JSON),
            "task_ids": mostly(st.lists(TASK_IDS, max_size=3), JSON),
            "headline_metric": mostly(METRICS, JSON),
            "degenerate_baselines": st.lists(
                mostly(st.fixed_dictionaries({"headline_metric": METRICS}), JSON), max_size=2
            )
            | JSON,
        },
    )
)
FILES = mostly(
    REPORT.map(json.dumps).map(str.encode),
    JSON.map(json.dumps).map(str.encode) | st.binary(max_size=32),
)
RECORD = st.fixed_dictionaries(
    {"task": mostly(st.fixed_dictionaries({"id": TASK_IDS}), JSON)},
    optional={"trajectories": mostly(st.lists(st.just({}), max_size=3), JSON)},
)
JSONL = st.none() | mostly(
    st.lists(RECORD.map(json.dumps), max_size=3).map("\n".join).map(str.encode),
    JSON.map(json.dumps).map(str.encode) | st.binary(max_size=32),
)


TASKED = (
    st.fixed_dictionaries(
        # Sound metrics, so that the examples reach the task check.
        {"split": st.just("test"), "summary": st.just({"episodes": 2.0, "reward": 0.5})},
        optional={
            "tasks": mostly(st.integers(0, 3), JSON),
            "samples_per_task": mostly(st.integers(1, 3), JSON),
            "task_ids": mostly(st.lists(TASK_IDS, max_size=3), JSON),
        },
    )
    .map(json.dumps)
    .map(str.encode)
)


def _compares_or_is_refused(tmp_path, reports: list[tuple[bytes, bytes | None]], allow: bool):
    paths = []
    for index, (report, jsonl) in enumerate(reports):
        folder = tmp_path / str(index)
        folder.mkdir(exist_ok=True)
        (folder / "eval_test_report.json").write_bytes(report)
        # The folder outlives the example (tmp_path is the test's): clear the last one's JSONL.
        (folder / "eval_test.jsonl").unlink(missing_ok=True)
        if jsonl is not None:
            (folder / "eval_test.jsonl").write_bytes(jsonl)
        paths.append(folder / "eval_test_report.json")
    try:
        markdown = compare_reports(paths, allow_different_tasks=allow)
    except LexrlError as error:
        assert "\n" not in str(error)
        return
    assert markdown.startswith("# ")
    assert ("| metric | A: " if len(paths) == 2 else "| rank | system | ") in markdown


@FUZZ
@given(
    reports=st.lists(st.tuples(FILES, JSONL), min_size=2, max_size=3),
    allow=st.booleans(),
)
def test_any_reports_compare_or_are_refused_in_one_line(tmp_path, reports, allow):
    _compares_or_is_refused(tmp_path, reports, allow)


@FUZZ
@given(
    reports=st.lists(st.tuples(TASKED, JSONL), min_size=2, max_size=3),
    allow=st.booleans(),
)
def test_any_task_information_compares_or_is_refused_in_one_line(tmp_path, reports, allow):
    _compares_or_is_refused(tmp_path, reports, allow)
