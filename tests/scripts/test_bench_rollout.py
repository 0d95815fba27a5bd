"""scripts/bench_rollout.py on the CPU demo's untrained tiny model: one task's 2 episodes."""

from __future__ import annotations

import math
import re

import pytest

from tests.scripts import run_script

pytestmark = pytest.mark.slow

LINE = re.compile(
    r"^(batched|one at a time)\s*:\s*([0-9.]+) episodes/s\s+\((\d+) LLM calls in (\d+) generate"
)


def test_batched_and_one_at_a_time_rollouts_are_timed(tiny_model_path, model_cache):
    result = run_script(
        "bench_rollout.py", "configs/demo_cpu.yaml", "--tasks", "1", "--generations", "2",
        "--warmstart.enabled", "false", "--model.cache_dir", model_cache,
        "--rollout.max_new_tokens", "8",
    )  # fmt: skip
    out = result.stdout
    assert "episodes: 2 (1 tasks x 2)" in out
    runs = {m[1]: m for line in out.splitlines() if (m := LINE.match(line))}
    assert set(runs) == {"batched", "one at a time"}, out
    for _, rate, calls, batches in (m.groups() for m in runs.values()):
        assert float(rate) > 0 and int(calls) >= 2 and 1 <= int(batches) <= int(calls)
    # One episode in flight: every LLM call is a generate batch of its own.
    serial = runs["one at a time"]
    assert serial[3] == serial[4]
    speed_up = float(re.search(r"speed-up\s*:\s*([0-9.]+)x", out)[1])
    assert math.isfinite(speed_up) and speed_up > 0
