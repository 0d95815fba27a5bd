"""scripts/gpu_train_check.py: its comparisons, and (slow) its CPU mode end to end, so that the
command a lent GPU runs cannot rot between GPUs. The CPU mode is also the suite's check that a
one-process run SIGKILLed after a checkpoint resumes to an uninterrupted run's adapter, bit for
bit (tests/train/test_resume.py stops two ZeRO-2 processes with SIGTERM)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import gpu_train_check  # noqa: E402


def test_relative_distance_is_zero_only_for_equal_adapters():
    a = {"x": torch.tensor([3.0, 4.0]), "y": torch.zeros(2)}
    assert gpu_train_check.relative_distance(a, {k: v.clone() for k, v in a.items()}) == 0.0
    b = {"x": torch.tensor([3.0, 4.0]), "y": torch.tensor([0.0, 0.5])}
    assert gpu_train_check.relative_distance(a, b) == pytest.approx(0.1)


def test_trained_shape_is_turns_mean_prompt_and_completion():
    record = {
        "perf/update_rows": 32.0,
        "count/episodes": 8.0,
        "perf/update_tokens": 32 * (200 + 16),
        "perf/tokens_generated": 32 * 16,
    }
    assert gpu_train_check.trained_shape(record, 16) == (4, 200, 16)


@pytest.mark.slow
def test_the_cpu_mode_trains_resumes_evaluates_and_plans(tmp_path, model_cache):
    out = tmp_path / "out"
    result = subprocess.run(
        ["bash", str(SCRIPTS / "gpu_train_check.sh"), "--cpu", "--out", str(out),
         "--cache-dir", model_cache, "--deadline-s", "1800"],
        capture_output=True, text=True, timeout=2400,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    lines = [json.loads(line) for line in (out / "gpu_train_check.jsonl").read_text().splitlines()]
    checks = {line["check"]: line for line in lines}
    assert list(checks) == ["resume", "eval", "design"]
    resume = checks["resume"]
    # On the CPU a resumed run is bit-identical to an uninterrupted one.
    assert resume["trained"] and resume["killed_after_step"] < resume["steps"]
    assert resume["b_vs_a1"] == 0.0 and resume["a2_vs_a1"] is None
    # ... and logs each step once: the steps redone after the kill are not logged twice.
    assert (
        resume["rewards_b"] == resume["rewards_a1"] and len(resume["rewards_b"]) == resume["steps"]
    )
    assert "resumed from" in (out / "logs" / "b.log").read_text()
    assert checks["eval"]["tasks"] == 4 and "mas_recall" in checks["eval"]["summary"]
    design = checks["design"]
    assert design["measured"]["update_tokens"] > 0 and design["plan"]["gib"]["peak"] > 0
