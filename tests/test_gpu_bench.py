"""scripts/gpu_bench.py on the CPU: the GPU benchmark's measurement and plan, shrunk to run here.

On the CPU the model is float32: bf16 matmuls run at a fraction of a GFLOPS on a CPU without
AVX-512 BF16 (0.15 GFLOPS on an AVX2-only EPYC, issue 32), which made the end-to-end run time out.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"


def load_gpu_bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", SCRIPTS / "gpu_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_spec(**changes):
    spec = {
        "layers": 1,
        "device": "cpu",
        "dtype": "float32",
        "attn": "sdpa",
        "tokens": "1x64+16",
        "trajectories": 2,
        "checkpointing": True,
        "micro_batch_tokens": 4096,
        "micro_batch_size": 8,
        "warmup": 0,
        "steps": 1,
    }
    return {**spec, **changes}


def statute_gpu_spec(**changes):
    """The GPU run's workload: 36 layers in bf16, 16 trajectories of 4 x 1,500 + 200 tokens."""
    return cpu_spec(
        layers=36,
        device="cuda",
        dtype="bfloat16",
        tokens="4x1500+200",
        trajectories=16,
        **changes,
    )


def test_plan_cuts_the_statute_workload_as_the_learner_does():
    bench = load_gpu_bench()
    rows = bench.make_rows(16, "4x1500+200")
    assert len(rows) == 64
    for tokens, rows_per_batch in ((4096, 2), (8192, 4)):
        spec = statute_gpu_spec(micro_batch_tokens=tokens)
        plan = bench.plan(spec, rows, "NVIDIA H100 80GB HBM3")
        expected = {"rows": rows_per_batch, "sequence": 1700, "completion": 200}
        assert plan["micro_batch"] == expected == plan["plan_micro_batch"]
        assert plan["micro_batches"] == 64 // rows_per_batch
        assert plan["plan_gpu"] == "H100 SXM" and plan["plan_attention"] == "flash"
        assert plan["predicted_peak_mib"] > 0 and plan["predicted_update_s"] > 0
        # Qwen3-4B's bf16 weights and the LoRA's float32 ones: about 7.6 GiB.
        assert 7_500 < plan["predicted_model_mib"] < 8_000
    assert bench.gpu_key("NVIDIA H200") == "h200"


def test_a_tasks_rows_share_the_first_prompt_and_half_of_a_later_one():
    from lexrl.train.shared_prefix import group_by_prefix

    bench = load_gpu_bench()
    rows = bench.make_rows(16, "4x1500+200", group_size=8, shared_fraction=0.5)
    # Trajectory t's rows are 4t .. 4t + 3; tasks are trajectories 0-7 and 8-15.
    first, later = rows[0::4], rows[1::4]
    assert all(r.prompt_ids == first[0].prompt_ids for r in first[:8])
    assert first[8].prompt_ids[:32] != first[0].prompt_ids[:32]
    assert all(r.prompt_ids[:750] == later[0].prompt_ids[:750] for r in later[:8])
    assert all(r.prompt_ids[750] != later[0].prompt_ids[750] for r in later[1:8])
    groups, saved = group_by_prefix(rows)
    assert sorted(g.prefix_length for g in groups) == [750] * 6 + [1500] * 2
    # 2 tasks x 7 further rows x (1,500 + 3 x 750) of 64 x 1,700 trained tokens.
    assert saved == 2 * 7 * (1500 + 3 * 750) / (64 * 1700)
    spec = statute_gpu_spec(micro_batch_tokens=8192, shared_prefix=True)
    plan = bench.plan(spec, rows, "NVIDIA H200")
    assert plan["encoded_tokens"] < 64 * 1700 * (1 - saved) * 1.25
    assert plan["prefix_share"] == round(saved, 4) == plan["plan_prefix_share"]


def test_padding_free_micro_batches_hold_only_real_tokens():
    bench = load_gpu_bench()
    rows = bench.make_rows(16, "4x1500+200", group_size=8, shared_fraction=0.5)
    trained = 64 * 1700
    padded = bench.plan(statute_gpu_spec(micro_batch_tokens=8192, shared_prefix=True), rows, "H200")
    for shared in (False, True):
        spec = statute_gpu_spec(micro_batch_tokens=8192, shared_prefix=shared, padding_free=True)
        plan = bench.plan(spec, rows, "NVIDIA H200")
        if not shared:
            assert plan["encoded_tokens"] == trained and plan["micro_batches"] == 16
        else:
            assert plan["encoded_tokens"] < padded["encoded_tokens"] < trained
            assert plan["micro_batches"] <= padded["micro_batches"]


def test_the_dtype_is_bf16_on_a_gpu_and_float32_on_the_cpu_unless_named():
    bench = load_gpu_bench()
    assert bench.resolve_dtype("auto", "cuda") == "bfloat16"
    assert bench.resolve_dtype("auto", "cpu") == "float32"
    assert bench.resolve_dtype("bfloat16", "cpu") == "bfloat16"


def test_an_out_of_memory_error_becomes_a_row(monkeypatch):
    import torch
    import transformers

    bench = load_gpu_bench()

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(transformers.Qwen3ForCausalLM, "_from_config", out_of_memory)
    result = bench.measure(cpu_spec())
    assert result["status"] == "oom"
    assert result["error"].startswith("OOM at model build: CUDA out of memory")
    assert result["predicted_peak_mib"] > 0
    assert "OOM at model build" in bench.table_row(result)


@pytest.mark.slow
def test_gpu_bench_runs_end_to_end_on_the_cpu(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_bench.py"), "--device", "cpu", "--dtype", "float32",
         "--layers", "1", "--tokens", "1x64+16", "--trajectories", "2", "--steps", "1",
         "--warmup", "0", "--checkpointing", "on", "--micro-batch-tokens", "4096",
         "--padding-free", "on"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    head = "| tokens | shared prefix | compiled layers | padding-free | encoded tokens | layers |"
    assert head in result.stdout
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["status"] == "ok", line
    assert line["dtype"] == "float32" and line["compile"] is False and line["padding_free"]
    assert line["rows"] == 2 and line["micro_batch"] == {
        "rows": 2,
        "sequence": 80,
        "completion": 16,
    }
    for key in (
        "update_peak_mib",
        "update_s",
        "tokens_per_s",
        "model_mib",
        "predicted_peak_mib",
        "predicted_update_s",
        "predicted_model_mib",
        "memory_ratio",
    ):
        assert line[key] > 0, key
    assert len(line["update_s_steps"]) == 1
    # The model's measured memory is the plan's (float32 weights here, bf16 on a GPU, and the
    # float32 LoRA) within 5%.
    assert abs(line["model_mib"] / line["predicted_model_mib"] - 1) < 0.05
    assert json.loads((tmp_path / "gpu_bench.jsonl").read_text().splitlines()[-1]) == line
    assert (tmp_path / "gpu_bench.md").read_text().startswith("| tokens |")
