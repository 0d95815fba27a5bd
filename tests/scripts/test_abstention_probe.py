"""scripts/abstention_probe.py on the argument demo shrunk to a few triples: it builds a
one-layer tiny model, fine-tunes it on the teacher's first plies, and reads its decisions."""

from __future__ import annotations

import json
import math
import re

import pytest

from tests.scripts import run_script

pytestmark = pytest.mark.slow


def test_the_probe_trains_a_tiny_model_and_reads_ply_one(tmp_path, model_cache):
    out = tmp_path / "probe.jsonl"
    result = run_script(
        "abstention_probe.py", "configs/argument_cpu.yaml", "--layers", "1", "--hidden", "32",
        "--episodes", "6", "--ply", "1", "--ply-only", "--out", str(out),
        "--env.train_per_kind", "2", "--env.test_per_kind", "2",
        "--rollout.max_new_tokens", "12", "--model.cache_dir", model_cache,
    )  # fmt: skip
    # `--ply-only`: of each teacher episode's turns, its first ply alone is trained on.
    rows, turns = map(int, re.search(r"(\d+) rows of (\d+) teacher turns", result.stdout).groups())
    assert 1 <= rows <= 6 and rows <= turns, result.stdout
    assert "SFT: " in result.stdout
    saved = json.loads(out.read_text())
    assert saved["variant"]["ply"] == 1 and saved["overrides"][:2] == ["--env.train_per_kind", "2"]
    rates = ["right_arguable", "right_mismatched", "right_non_arguable"]
    for key in rates + ["argument_quality_arguable", "cites_a_factor_its_case_lacks"]:
        assert 0.0 <= saved[key] <= 1.0, (key, saved)
    assert -1.0 <= saved["separation"] <= 1.0 and math.isfinite(saved["minutes"])
    # What it prints is what it saved.
    printed = json.loads(result.stdout[result.stdout.index("{") :])
    assert printed == saved
