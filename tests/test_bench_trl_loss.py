"""scripts/bench_trl_loss.py: the rows both systems get, the ratios, and (slow) one end-to-end
run of lexrl and TRL's loss path on a 1-layer Qwen3-4B-wide model."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench_trl_loss  # noqa: E402


def test_rows_are_seeded_and_advantages_alternate():
    prompts, completions, advantages = bench_trl_loss.make_rows("3x5+2")
    assert [len(p) for p in prompts] == [5, 5, 5] and [len(c) for c in completions] == [2, 2, 2]
    assert advantages == [-1.0, 1.0, -1.0]
    assert bench_trl_loss.make_rows("3x5+2") == (prompts, completions, advantages)


def test_ratios_are_lexrl_over_each_trl_variant_of_the_medians():
    def run(system: str, mb: float, tps: float, checkpointing: bool = False) -> dict:
        return {
            "system": system,
            "checkpointing": checkpointing,
            "measured_mb": mb,
            "tokens_per_s": tps,
        }

    results = [
        run("lexrl", 100, 30),
        run("trl", 200, 10),
        run("lexrl", 300, 50),
        run("trl", 400, 20),
        run("lexrl", 200, 40),
        run("trl", 300, 15),
        run("lexrl", 50, 10, checkpointing=True),
    ]
    summary = bench_trl_loss.ratios(results, ["off", "on"])
    assert summary == {"off": {"trl": {"peak_memory": round(200 / 300, 3), "tokens_per_s": 2.667}}}


@pytest.mark.slow
def test_lexrl_and_trl_each_measure_an_update():
    # float32: CI's CPUs may lack AVX-512, where bf16 matmuls made this one run take 7 minutes.
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench_trl_loss.py"), "--layers", "1",
         "--shape", "2x16+8", "--checkpointing", "on", "--systems", "lexrl,trl",
         "--dtype", "float32"],
        capture_output=True, text=True, timeout=900, cwd=SCRIPTS.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert [r["system"] for r in report["results"]] == ["lexrl", "trl"]
    assert all(r["measured_mb"] > 0 and r["tokens_per_s"] > 0 for r in report["results"])
    assert set(report["ratios"]["on"]["trl"]) == {"peak_memory", "tokens_per_s"}
