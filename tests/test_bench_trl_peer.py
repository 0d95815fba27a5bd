"""scripts/bench_trl_peer.py end to end on SmolLM2: one step of TRL and of lexrl (about 1-2 min
on 2 CPU cores)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "bench_trl_peer.py"


@pytest.mark.slow
def test_trl_and_lexrl_each_time_a_step(smollm2_path, model_cache):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--steps", "1", "--warmup", "0", "--k", "2", "--g", "1",
         "--max-new-tokens", "4", "--systems", "trl,lexrl-hf", "--cache-dir", model_cache],
        capture_output=True, text=True, timeout=600, cwd=SCRIPT.parents[1],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    for system in ("trl", "lexrl-hf"):
        row = next(line for line in lines if line.startswith(f"| {system} |"))
        seconds = [float(cell) for cell in row.strip("|").split("|")[1:5]]
        assert all(value > 0 for value in seconds), row
    report = json.loads(lines[-1])
    assert report["setup"]["k"] == 2 and report["setup"]["g"] == 1
    assert report["results"]["trl"]["ratio_to_trl"] == 1.0
    assert report["results"]["lexrl-hf"]["ratio_to_trl"] > 0
