"""A damaged latest checkpoint no longer blocks resume: `lexrl train --run.resume true` skips
it, says which file is wrong, and continues from the newest checkpoint that verifies."""

import json

import pytest

from tests.e2e import run_lexrl, write_config


def _logged_steps(out) -> list[int]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in lines if line.strip()]


@pytest.mark.slow
def test_resume_skips_a_truncated_latest_checkpoint_and_continues_from_the_one_before(
    tmp_path, model_cache
):
    out = tmp_path / "out"
    config = write_config(tmp_path / "run.yaml", model_cache, out, steps=2, evals=False)
    first = run_lexrl("train", str(config))
    assert first.returncode == 0, first.stderr[-3000:]
    latest = out / "checkpoints" / "step-000002"
    optimizer = latest / "optimizer.pt"
    optimizer.write_bytes(optimizer.read_bytes()[:1024])

    resumed = run_lexrl("train", str(config), "--run.resume", "true", "--run.max_steps", "3")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    skipped = next(line for line in resumed.stderr.splitlines() if "skipped" in line)
    assert str(latest) in skipped and "optimizer.pt" in skipped
    assert f"resumed from {out / 'checkpoints' / 'step-000001'} (step 1)" in resumed.stderr
    # Step 2 is done again from step 1's checkpoint, and logged once.
    assert _logged_steps(out) == [1, 2, 3]
