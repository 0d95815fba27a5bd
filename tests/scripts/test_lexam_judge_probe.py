"""scripts/lexam_judge_probe.py asking the test session's served SmolLM2 (`--base-url`) to judge
the shortest open question's four answers three ways."""

from __future__ import annotations

import pytest

from tests.scripts import run_script, table_rows

pytestmark = pytest.mark.slow

KINDS = ["reference", "other reference", "I do not know.", "the question"]


def test_every_way_and_answer_gets_a_row(smollm2_server, model_cache):
    result = run_script(
        "lexam_judge_probe.py", "--cache-dir", model_cache, "--questions", "1",
        "--max-tokens", "8", "--base-url", smollm2_server.base_url,
        "--served-model", smollm2_server.model,
    )  # fmt: skip
    header, *rows = table_rows(result.stdout)
    assert header == ["way", "answer", "replies with a score", "mean score"]
    assert [row[:2] for row in rows] == [
        [way, kind] for way in ("paper", "few-shot", "forced") for kind in KINDS
    ]
    for _, _, scored, mean in rows:
        parsed, asked = map(int, scored.split("/"))
        assert asked == 1 and 0 <= parsed <= 1
        assert mean == "-" if parsed == 0 else 0.0 <= float(mean) <= 1.0
