"""Fuzzing `lexrl compare`: any two report files (report-shaped JSON with any values, any JSON,
any bytes) are compared into a table or refused with a `LexrlError` (one `<kind> error` line),
never another exception. The examples are derandomized, so CI sees the same ones on every run.
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
        {key: st.just(value) for key, value in report.items()},
        optional={
            "split": mostly(st.just("test"), JSON),
            "env_name": mostly(st.just("lexam"), JSON),
            "system": JSON,
        },
    )
)
FILES = mostly(
    REPORT.map(json.dumps).map(str.encode),
    JSON.map(json.dumps).map(str.encode) | st.binary(max_size=32),
)


@FUZZ
@given(a=FILES, b=FILES)
def test_any_two_report_files_compare_or_are_refused_in_one_line(tmp_path, a, b):
    (tmp_path / "a.json").write_bytes(a)
    (tmp_path / "b.json").write_bytes(b)
    try:
        markdown = compare_reports(tmp_path / "a.json", tmp_path / "b.json")
    except LexrlError as error:
        assert "\n" not in str(error)
        return
    assert markdown.startswith("# ") and "| metric | A: " in markdown
