"""scripts/bench_shared_prefix.py on a one-layer random Qwen3 a few MB large: both modes' updates
run, each in its own process, and the table reports them."""

from __future__ import annotations

import math

import pytest

from tests.scripts import run_script, table_rows

pytestmark = pytest.mark.slow


def test_updates_with_and_without_shared_prefixes_are_timed_and_measured():
    result = run_script(
        "bench_shared_prefix.py", "--tasks", "2", "--k", "2", "--prompt", "32", "--completion",
        "8", "--hidden", "128", "--layers", "1", "--vocab", "512", "--micro-batch-size", "4",
        "--repeats", "1",
    )  # fmt: skip
    out = result.stdout
    # Each task's 2 rows repeat its 32-token prompt once: 2 x 32 of 2 x 2 x 40 trained tokens.
    assert "2 tasks x 2 rows of 32 + 8 tokens" in out and "prefix copies are 40%" in out, out
    header, *rows = table_rows(out)
    assert header == ["shared_prefix", "update s (each)", "mean s", "peak MB above the model"]
    assert [row[0] for row in rows] == ["off", "on"]
    for row in rows:
        assert float(row[2]) >= 0 and math.isfinite(float(row[3].replace(",", "")))
    ratios = out.splitlines()[-1]
    assert ratios.startswith("shared / repeated: time ") and "peak memory" in ratios
