import json

import pytest

from lexrl.types import Trajectory
from tests.e2e import run_lexrl, write_config


def test_envs_lists_statute():
    result = run_lexrl("envs")
    assert result.returncode == 0 and "statute" in result.stdout


def test_config_error_names_the_key_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo:\n  num_generations: 4\n  lr: 0.1\n")
    result = run_lexrl("train", str(bad))
    assert result.returncode == 2
    assert "bad.yaml" in result.stderr and "lr" in result.stderr


@pytest.mark.slow
def test_train_eval_rollout_end_to_end(tmp_path, model_cache):
    out = tmp_path / "run"
    config = write_config(tmp_path / "tiny.yaml", model_cache, out, steps=2)
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-3000:]

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for key in ("reward/total", "reward/recall", "reward/step_penalty", "env/mas_recall", "loss/kl",
                "loss/clip_fraction", "perf/tokens_generated", "perf/rollout_s", "perf/update_s",
                "agent/planner/turns"):  # fmt: skip
        assert key in records[0], key
    summaries = json.loads((out / "eval_summary.json").read_text())
    assert set(summaries) == {"before", "after"} and "mas_recall" in summaries["after"]
    assert (out / "learning_curve.png").stat().st_size > 0
    assert (out / "checkpoints" / "step-000002" / "adapter" / "adapter_model.safetensors").is_file()
    assert (out / "samples.jsonl").read_text().count('"role"') > 0
    assert list((out / "wandb").glob("offline-run-*")), "W&B should have written an offline run"

    checkpoint = out / "checkpoints" / "step-000002"
    result = run_lexrl("eval", str(config), "--checkpoint", str(checkpoint))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((checkpoint / "eval_test_summary.json").read_text())
    assert summary["episodes"] == 4

    dump = tmp_path / "rollouts.jsonl"
    result = run_lexrl(
        "rollout",
        str(config),
        "--checkpoint",
        str(checkpoint),
        "--num-tasks",
        "2",
        "--out",
        str(dump),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dump.read_text().splitlines()
    assert len(lines) == 2 * 4
    assert Trajectory.from_json(lines[0]).to_json() == lines[0]


def test_envs_stats_prints_loader_statistics():
    result = run_lexrl("envs", "statute", "--stats")
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads(result.stdout)
    assert stats["corpus_size"] == 49 and stats["test"]["queries"] == 110


@pytest.mark.slow
def test_bm25_baseline_summary_matches_its_rankings(tmp_path):
    from tests.eval.test_ranking import direct

    config = tmp_path / "bm25.yaml"
    config.write_text(f"eval:\n  ks: [3, 10]\nrun:\n  output_dir: {tmp_path / 'out'}\n")
    result = run_lexrl("eval", str(config), "--baseline", "bm25")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "recall@10" in result.stdout and "built-in demo world" in result.stdout
    records = [
        json.loads(line)
        for line in (tmp_path / "out" / "baseline_bm25.jsonl").read_text().splitlines()
    ]
    summary = json.loads((tmp_path / "out" / "baseline_bm25_summary.json").read_text())
    assert len(records) == 110
    for k in (3, 10):
        for name in ("recall", "mrr", "ndcg", "hit_rate"):
            expected = sum(
                direct(r["ranking"], r["gold"], k)[f"{name}@{k}"] for r in records
            ) / len(records)
            assert summary[f"{name}@{k}"] == pytest.approx(expected, abs=1e-9)
