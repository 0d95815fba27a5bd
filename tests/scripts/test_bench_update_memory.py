"""scripts/bench_update_memory.py with `--model tiny`: the measured peak of one update beside
`lexrl plan`'s prediction, each measurement in its own process, and `--from-json` reading the
runs back."""

from __future__ import annotations

import json
import math

import pytest

from tests.scripts import run_script, table_rows

pytestmark = pytest.mark.slow

HEADER = [
    "layers", "rows x prompt + completion", "checkpointing", "predicted MB", "measured MB",
    "predicted / measured", "update s", "tokens/s",
]  # fmt: skip


def test_a_tiny_update_is_measured_and_predicted(tmp_path):
    saved = tmp_path / "runs.jsonl"
    result = run_script(
        "bench_update_memory.py", "--model", "tiny", "--layers", "1", "--shapes", "2x64+16",
        "--checkpointing", "off,on", "--json", str(saved),
    )  # fmt: skip
    assert result.stdout.splitlines()[0] == "model: tiny, random weights, bf16 on the CPU"
    header, *rows = table_rows(result.stdout)
    assert header == HEADER
    assert [row[:3] for row in rows] == [["1", "2x64+16", "off"], ["1", "2x64+16", "on"]]
    for row in rows:
        predicted, measured, ratio, seconds, rate = (float(c.replace(",", "")) for c in row[3:])
        assert predicted > 0 and measured > 0 and math.isfinite(ratio) and ratio > 0
        assert seconds > 0 and rate > 0
    runs = [json.loads(line) for line in saved.read_text().splitlines()]
    assert [(r["model"], r["checkpointing"]) for r in runs] == [("tiny", False), ("tiny", True)]
    # Checkpointing keeps fewer activations: this checkout's plan says so for the same shape.
    assert runs[1]["predicted"]["total"] < runs[0]["predicted"]["total"]

    again = run_script("bench_update_memory.py", "--from-json", str(saved))
    assert table_rows(again.stdout)[1:] == rows
