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
    result = run_lexrl(
        "eval", str(config), "--checkpoint", str(checkpoint), "--eval.baselines", "[bm25]"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((checkpoint / "eval_test_report.json").read_text())
    policy = report["systems"][str(checkpoint)]
    episodes = report["notes"][str(checkpoint)]["episode_means"]
    assert episodes["episodes"] == 4
    # ranx over the written pools agrees with the env's own MAS-stage recall
    assert policy["mas_recall@6"]["mean"] == pytest.approx(episodes["mas_recall"], abs=1e-9)
    assert (
        policy["mas_recall@6"]["low"]
        <= policy["mas_recall@6"]["mean"]
        <= policy["mas_recall@6"]["high"]
    )
    assert {"recall@10", "mrr@10", "ndcg@10", "hit_rate@10"} <= set(policy)
    assert set(report["systems"]["bm25"]) == {"recall@10", "mrr@10", "ndcg@10", "hit_rate@10"}
    assert "| bm25 |" in (checkpoint / "eval_test_report.md").read_text()
    lines = (checkpoint / "eval_test.jsonl").read_text().splitlines()
    first = json.loads(lines[0])["trajectories"][0]
    assert first["final_ranking"] == first["outcome"]["pool"] and first["final_reranker"] is None

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
    result = run_lexrl("eval", str(config), "--eval.policy", "false", "--eval.baselines", "[bm25]")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "recall@10" in result.stdout and "built-in demo world" in result.stdout
    records = [
        json.loads(line)
        for line in (tmp_path / "out" / "baseline_bm25_test.jsonl").read_text().splitlines()
    ]
    report = json.loads((tmp_path / "out" / "eval_test_report.json").read_text())
    summary = report["systems"]["bm25"]
    assert len(records) == 110 and report["queries"] == 110
    for k in (3, 10):
        for name in ("recall", "mrr", "ndcg", "hit_rate"):
            expected = sum(
                direct(r["ranking"], r["gold"], k)[f"{name}@{k}"] for r in records
            ) / len(records)
            assert summary[f"{name}@{k}"]["mean"] == pytest.approx(expected, abs=1e-9)
            assert summary[f"{name}@{k}"]["low"] <= expected <= summary[f"{name}@{k}"]["high"]


@pytest.mark.slow
def test_index_then_dense_baselines_with_tiny_models(tmp_path):
    config = tmp_path / "dense.yaml"
    config.write_text(
        "env:\n  statute:\n    first_stage_k: 8\n    retrieval:\n      dense_model: tiny\n"
        f"      reranker_model: tiny\n      index_dir: {tmp_path / 'index'}\n"
        f"eval:\n  policy: false\n  baselines: [bm25, dense, dense+reranker]\n"
        f"run:\n  output_dir: {tmp_path / 'out'}\n"
    )
    result = run_lexrl("index", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    built = json.loads(result.stdout.strip().splitlines()[-1])
    assert (built["documents"], built["dim"]) == (49, 64)
    assert (tmp_path / "index" / built["index"].rsplit("/", 1)[-1]).is_file()

    result = run_lexrl("eval", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "encoding corpus" not in result.stderr, "the index should come from the cache"
    report = json.loads((tmp_path / "out" / "eval_test_report.json").read_text())
    assert list(report["systems"]) == ["bm25", "dense", "dense+reranker"]
    dense = [json.loads(line) for line in (tmp_path / "out" / "baseline_dense_test.jsonl").open()]
    reranked = [
        json.loads(line)
        for line in (tmp_path / "out" / "baseline_dense+reranker_test.jsonl").open()
    ]
    # the depth (10) exceeds first_stage_k (8): the reranker re-orders the dense top 10
    for plain, rerank in zip(dense, reranked, strict=True):
        assert len(plain["ranking"]) == len(rerank["ranking"]) == 10
        assert set(rerank["ranking"]) == set(plain["ranking"])
    assert any(p["ranking"] != r["ranking"] for p, r in zip(dense, reranked, strict=True))
