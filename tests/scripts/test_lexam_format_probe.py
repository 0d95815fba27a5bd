"""scripts/lexam_format_probe.py on SmolLM2: two questions (a padded batch), one short sample each,
under each of the three examinee prompts (prefilling the long `paper` prompt is most of the time)."""

from __future__ import annotations

import json

import pytest

from tests.scripts import run_script, table_rows

pytestmark = pytest.mark.slow


def test_each_prompt_gets_its_share_of_parsed_and_right_answers(smollm2_path, model_cache):
    result = run_script(
        "lexam_format_probe.py", "--cache-dir", model_cache, "--questions", "2", "--samples",
        "1", "--max-new-tokens", "6",
    )  # fmt: skip
    lines = result.stdout.splitlines()
    header, *rows = table_rows("\n".join(lines[:-1]))
    assert header == ["prompt", "answers", "marker parsed", "right", "seconds"]
    variants = ["paper", "brief without example", "brief with example"]
    assert [row[0] for row in rows] == variants
    summary = json.loads(lines[-1])
    assert summary["model"] == "smollm2-135m"
    for row, saved in zip(rows, summary["rows"], strict=True):
        answers, parsed, right = map(int, row[1:4])
        assert answers == 2 and 0 <= right <= parsed <= answers
        assert saved == {"prompt": row[0], "answers": answers, "parsed": parsed, "right": right}
