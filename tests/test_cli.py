import json
from pathlib import Path

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


def report_dir(stdout: str) -> Path:
    """The folder of the report `lexrl eval` printed (`report: <dir>/eval_<split>_report.md`)."""
    line = next(line for line in stdout.splitlines() if line.startswith("report: "))
    return Path(line.removeprefix("report: ").split(" (and")[0]).parent


@pytest.mark.slow
def test_train_eval_rollout_end_to_end(tmp_path, model_cache):
    out = tmp_path / "run"
    config = write_config(tmp_path / "tiny.yaml", model_cache, out, steps=2, wandb="offline")
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "GRPO steps: 100%" in result.stderr and "reward=" in result.stderr, "no step bar"

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2]
    for key in ("reward/total", "reward/recall", "reward/step_penalty", "env/mas_recall", "loss/kl",
                "loss/clip_fraction", "perf/tokens_generated", "perf/rollout_s", "perf/update_s",
                "perf/update_tokens", "perf/update_tokens_per_s", "agent/planner/turns"):  # fmt: skip
        assert key in records[0], key
    # Trained tokens count each row's prompt too: more than the completions generated.
    assert records[0]["perf/update_tokens"] > records[0]["perf/tokens_generated"] > 0
    assert "perf/update_peak_gib" not in records[0], "a CUDA number on the CPU"
    summaries = json.loads((out / "eval_summary.json").read_text())
    assert set(summaries) == {"before", "after"} and "mas_recall" in summaries["after"]
    assert (out / "learning_curve.png").stat().st_size > 0
    assert (out / "checkpoints" / "step-000002" / "adapter" / "adapter_model.safetensors").is_file()
    assert (out / "samples.jsonl").read_text().count('"role"') > 0
    assert list((out / "wandb").glob("offline-run-*")), "W&B should have written an offline run"

    checkpoint = out / "checkpoints" / "step-000002"
    result = run_lexrl(
        "eval",
        str(config),
        "--checkpoint",
        str(checkpoint),
        "--env.eval.baselines",
        "[bm25]",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = report_dir(result.stdout)
    assert written.parent == out / "eval" and written.name.startswith("step-000002_test_first4_")
    report = json.loads((written / "eval_test_report.json").read_text())
    policy = report["env"]["systems"][str(checkpoint)]
    episodes = report["summary"]
    assert episodes["episodes"] == 4
    # ranx over the written pools agrees with the env's own MAS-stage recall
    assert policy["mas_recall@6"]["mean"] == pytest.approx(episodes["mas_recall"], abs=1e-9)
    assert (
        policy["mas_recall@6"]["low"]
        <= policy["mas_recall@6"]["mean"]
        <= policy["mas_recall@6"]["high"]
    )
    assert {"recall@10", "mrr@10", "ndcg@10", "hit_rate@10"} <= set(policy)
    assert set(report["env"]["systems"]["bm25"]) == {
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "hit_rate@10",
    }
    assert f"| metric | {checkpoint} | bm25 |" in (written / "eval_test_report.md").read_text()
    first = json.loads((written / "eval_test.jsonl").read_text().splitlines()[0])
    ranked = json.loads((written / "eval_test_final_rankings.jsonl").read_text().splitlines()[0])
    assert (ranked["task_id"], ranked["sample"]) == (first["task"]["id"], 0)
    assert ranked["final_ranking"] == first["trajectories"][0]["outcome"]["pool"]
    assert ranked["final_reranker"] is None

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
    result = run_lexrl("envs", "statute", "--stats", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads(result.stdout)
    assert stats["corpus_size"] == 49 and stats["test"]["queries"] == 110
    # Which options were loaded is said: the defaults are not the demo config's.
    assert "statute: loaded with the options' defaults (--config FILE" in result.stderr


@pytest.mark.slow
def test_bm25_baseline_summary_matches_its_rankings(lexrl_in_process, tmp_path):
    from tests.envs.test_statute_ranking import direct

    config = tmp_path / "bm25.yaml"
    config.write_text(
        f"env:\n  type: statute\n  eval:\n    ks: [3, 10]\nrun:\n  output_dir: {tmp_path / 'out'}\n"
    )
    result = lexrl_in_process(
        "eval", str(config), "--eval.policy", "false", "--env.eval.baselines", "[bm25]"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "recall@10" in result.stdout and "built-in demo world" in result.stdout
    written = report_dir(result.stdout)
    assert written.parent == tmp_path / "out" / "eval"
    records = [
        json.loads(line) for line in (written / "baseline_bm25_test.jsonl").read_text().splitlines()
    ]
    report = json.loads((written / "eval_test_report.json").read_text())
    summary = report["env"]["systems"]["bm25"]
    assert len(records) == 110 and report["env"]["queries"] == 110
    for k in (3, 10):
        for name in ("recall", "mrr", "ndcg", "hit_rate"):
            expected = sum(
                direct(r["ranking"], r["gold"], k)[f"{name}@{k}"] for r in records
            ) / len(records)
            assert summary[f"{name}@{k}"]["mean"] == pytest.approx(expected, abs=1e-9)
            assert summary[f"{name}@{k}"]["low"] <= expected <= summary[f"{name}@{k}"]["high"]

    # Another setting of the same evaluation writes beside the first, never over it.
    result = lexrl_in_process(
        "eval", str(config), "--eval.policy", "false", "--env.eval.baselines", "[bm25]",
        "--eval.max_tasks", "20",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    second = report_dir(result.stdout)
    assert second != written and second.name.startswith("base_test_first20_baselines_")
    assert json.loads((second / "eval_test_report.json").read_text())["env"]["queries"] == 20
    assert json.loads((written / "eval_test_report.json").read_text()) == report


@pytest.mark.slow
def test_index_then_dense_baselines_with_tiny_models(lexrl_in_process, tmp_path):
    config = tmp_path / "dense.yaml"
    config.write_text(
        "env:\n  type: statute\n  first_stage_k: 8\n  retrieval:\n    dense_model: tiny\n"
        f"    reranker_model: tiny\n    index_dir: {tmp_path / 'index'}\n"
        f"  eval:\n    baselines: [bm25, dense, dense+reranker]\neval:\n  policy: false\n"
        f"run:\n  output_dir: {tmp_path / 'out'}\n"
    )
    result = lexrl_in_process("index", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    built = json.loads(result.stdout.strip().splitlines()[-1])
    assert (built["documents"], built["dim"]) == (49, 64)
    assert (tmp_path / "index" / built["index"].rsplit("/", 1)[-1]).is_file()

    result = lexrl_in_process("eval", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "encoding corpus" not in result.stderr, "the index should come from the cache"
    written = report_dir(result.stdout)
    report = json.loads((written / "eval_test_report.json").read_text())
    assert list(report["env"]["systems"]) == ["bm25", "dense", "dense+reranker"]
    dense = [json.loads(line) for line in (written / "baseline_dense_test.jsonl").open()]
    reranked = [
        json.loads(line) for line in (written / "baseline_dense+reranker_test.jsonl").open()
    ]
    # the depth (10) exceeds first_stage_k (8): the reranker re-orders the dense top 10
    for plain, rerank in zip(dense, reranked, strict=True):
        assert len(plain["ranking"]) == len(rerank["ranking"]) == 10
        assert set(rerank["ranking"]) == set(plain["ranking"])
    assert any(p["ranking"] != r["ranking"] for p, r in zip(dense, reranked, strict=True))


def csaid_config(tmp_path: Path, dense_model: str) -> Path:
    """A CSAID config on two written queries, its dense model `dense_model`."""
    from tests.envs.test_csaid_data import QUERIES

    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(QUERIES, ensure_ascii=False), encoding="utf-8")
    config = tmp_path / "csaid.yaml"
    config.write_text(
        f"env:\n  type: statute\n  dataset: csaid\n  language: zh\n  queries_path: {queries}\n"
        f"  retrieval:\n    first_stage: dense\n    dense_model: {dense_model}\n"
        f"  eval:\n    baselines: [dense]\neval:\n  policy: false\nrun:\n  output_dir: {tmp_path / 'out'}\n"
    )
    return config


def test_stats_load_no_retrieval_model(tmp_path):
    config = csaid_config(tmp_path, "no-such-org/no-such-embedder")
    result = run_lexrl("envs", "statute", "--stats", "--json", "--config", str(config))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["test"]["queries"] == 2


def test_a_model_neither_local_nor_on_the_hub_fails_in_one_line(lexrl_in_process, tmp_path):
    config = csaid_config(tmp_path, "no-such-org/no-such-embedder")
    result = lexrl_in_process("eval", str(config))
    assert result.returncode == 4
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("model error: `env.retrieval.dense_model`: ")
    for way_out in (
        "'no-such-org/no-such-embedder'",
        "local folder",
        "lexrl index",
        "HF_HUB_OFFLINE",
    ):
        assert way_out in last

    result = lexrl_in_process(
        "eval",
        str(config),
        "--eval.policy",
        "true",
        "--model.name_or_path",
        "no-such-org/no-such-llm",
    )
    assert result.returncode == 4 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "model error: `model.name_or_path`: 'no-such-org/no-such-llm' is not a local folder"
        )
    )


def test_a_mistyped_option_is_one_line(tmp_path):
    result = run_lexrl("train", "configs/demo_cpu.yaml", "--grpo.nume_generations", "3")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "config error: unknown option --grpo.nume_generations; did you mean --grpo.num_generations?"
    )


@pytest.mark.slow
def test_eval_says_that_it_builds_the_warm_start_and_then_that_it_reuses_it(
    lexrl_in_process, tmp_path, model_cache
):
    config = tmp_path / "lexam.yaml"
    config.write_text(
        f"model:\n  name_or_path: tiny\n  cache_dir: {model_cache}\n"
        "rollout:\n  max_new_tokens: 8\nenv:\n  type: lexam\n"
        "warmstart:\n  enabled: true\n  num_episodes: 4\n  epochs: 1\n"
        f"eval:\n  max_tasks: 1\nrun:\n  output_dir: {tmp_path / 'run'}\n"
    )
    built, reused = (lexrl_in_process("eval", str(config)) for _ in range(2))
    assert built.returncode == reused.returncode == 0, built.stderr[-3000:] + reused.stderr[-3000:]
    said = " ".join(built.stdout.split())
    assert "warm-start: 1 SFT steps on 4 scripted rows, built once and cached in " in said
    assert said.index("warm-start: 1 SFT steps") < said.index("report: ")
    assert "warm-start: cached " in reused.stdout and "SFT steps" not in reused.stdout


def test_lexam_eval_prints_means_with_intervals_and_writes_the_report(
    lexrl_in_process, tmp_path, model_cache
):
    config = tmp_path / "lexam.yaml"
    config.write_text(
        f"model:\n  name_or_path: tiny\n  cache_dir: {model_cache}\n"
        "rollout:\n  max_new_tokens: 8\n"
        "env:\n  type: lexam\n"
        f"eval:\n  max_tasks: 4\n  samples_per_task: 2\nrun:\n  output_dir: {tmp_path / 'run'}\n"
    )
    result = lexrl_in_process("eval", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "accuracy" in result.stdout and "parsed" in result.stdout
    written = report_dir(result.stdout)
    report = json.loads((written / "eval_test_report.json").read_text())
    assert report["summary"]["episodes"] == 8
    assert set(report["intervals"]) >= {"reward", "accuracy", "parsed", "correct", "format"}
    assert len((written / "eval_test.jsonl").read_text().splitlines()) == 4
    assert "## LEXam" in (written / "eval_test_report.md").read_text()
    assert report["env"]["n"] == 8 and set(report["env"]["by_language"]) == {"en"}
    assert report["env"]["accuracy"]["mean"] == pytest.approx(report["summary"]["accuracy"])


@pytest.mark.slow
def test_argument_eval_prints_the_papers_table_beside_the_teacher(
    lexrl_in_process, tmp_path, model_cache
):
    config = tmp_path / "argument.yaml"
    config.write_text(
        f"model:\n  name_or_path: tiny\n  cache_dir: {model_cache}\n"
        "rollout:\n  max_new_tokens: 12\n"
        "env:\n  type: argument\n  workflow: MA\n"
        "  train_per_kind: 4\n  test_per_kind: 2\n"
        f"eval:\n  samples_per_task: 2\nrun:\n  output_dir: {tmp_path / 'run'}\n"
    )
    result = lexrl_in_process("eval", str(config), "--env.workflow", "SA")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| SA (base) | 4 / 4 / 4 |" in result.stdout  # episodes: 2 triples x 2 samples
    written = report_dir(result.stdout)
    report = json.loads((written / "eval_test_report.json").read_text())
    assert report["summary"]["episodes"] == 12
    teacher = report["env"]["teacher"]
    # The teacher cites its side's analogy and distinctions, not every factor: Rec_U above 0,
    # and nothing fabricated.
    assert teacher["utilisation_recall"]["mean"] > 0.0
    assert all(cell["mean"] == 100.0 for cell in teacher["hallucination_accuracy"].values())
    assert {k: v["mean"] for k, v in teacher["successful_abstention"].items()} == {
        "mismatched": 100.0,
        "non_arguable": 100.0,
    }
    # a random-weight model writes no JSON, so it cites no factor
    assert report["env"]["SA (base)"]["utilisation_recall"]["mean"] == 0.0
    assert "## Argument" in (written / "eval_test_report.md").read_text()


def test_a_checkpoint_is_evaluated_on_the_base_it_was_trained_on(tmp_path):
    from lexrl.cli import adapter_base

    base = tmp_path / "tiny-warm"
    base.mkdir()
    (base / "config.json").write_text("{}")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    assert adapter_base(adapter) == str(base)
    # a Hub id (or a folder that is gone) is left to the config's model
    (adapter / "adapter_config.json").write_text(
        json.dumps({"base_model_name_or_path": "Qwen/Qwen3-4B-Instruct-2507"})
    )
    assert adapter_base(adapter) is None


DEBATE_TINY = """model:
  name_or_path: tiny
  cache_dir: {cache}
rollout:
  max_new_tokens: 8
grpo:
  num_generations: 2
  tasks_per_step: 1
  advantages: role
env:
  type: debate
  reward_mode: adversarial
  debater_max_new_tokens: 8
  judge_max_new_tokens: 8
eval:
  max_tasks: 6
logging:
  wandb_mode: disabled  # W&B's service costs each run seconds; the tiny run above checks it
run:
  output_dir: {out}
  max_steps: 1
  eval_before: false
  eval_after: false
"""


@pytest.mark.slow
def test_debate_eval_scores_every_system_on_the_same_questions(
    lexrl_in_process, tmp_path, model_cache
):
    config = tmp_path / "debate.yaml"
    config.write_text(DEBATE_TINY.format(cache=model_cache, out=tmp_path / "run"))
    result = lexrl_in_process("eval", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "single agent (base)" in result.stdout and "MAD-IRAC (base)" in result.stdout
    report = json.loads((report_dir(result.stdout) / "eval_test_report.json").read_text())
    assert report["env"]["questions"] == 2  # 6 tasks: 2 held-out questions x 3 systems
    systems = report["env"]["systems"]
    assert list(systems) == ["single", "vanilla", "irac"]
    assert all(systems[s]["n"] == 2 for s in systems)
    assert systems["irac"]["y_invalid"] is not None and systems["single"]["y_invalid"] is None


@pytest.mark.slow
def test_debate_adversarial_training_logs_each_roles_reward(tmp_path, model_cache):
    out = tmp_path / "run"
    config = tmp_path / "debate.yaml"
    config.write_text(DEBATE_TINY.format(cache=model_cache, out=out))
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    for role in ("debater_x", "debater_y", "judge"):
        assert f"agent/{role}/reward" in record and f"agent/{role}/turns" in record
    # adversarial: X and the judge earn the final correctness, Y the judge adopting its option
    # minus the invalid-action penalty (format_weight 0)
    assert record["agent/debater_x/reward"] == pytest.approx(record["reward/correct"])
    assert record["agent/judge/reward"] == pytest.approx(record["reward/correct"])
    assert record["agent/debater_y/reward"] == pytest.approx(
        record["env/judge_follows_y"] + record["reward/invalid"]
    )


@pytest.mark.slow
def test_gdpr_eval_scores_the_grid_and_the_live_form_beside_the_baselines(
    lexrl_in_process, tmp_path, model_cache
):
    config = tmp_path / "gdpr.yaml"
    config.write_text(
        f"model:\n  name_or_path: tiny\n  cache_dir: {model_cache}\n"
        "env:\n  type: gdpr\n  system: live\n"
        "  eval_grid: [none, F+LR+AR+CS/bm25/5, live]\n"
        "  max_new_tokens: 8\n  agent_max_new_tokens: 8\n"
        f"eval:\n  max_tasks: 6\nrun:\n  output_dir: {tmp_path / 'run'}\n"
    )
    result = lexrl_in_process("eval", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "always Yes / always B" in result.stdout
    report = json.loads((report_dir(result.stdout) / "eval_test_report.json").read_text())
    assert report["env"]["questions"] == 2  # 6 tasks: 2 held-out questions x 3 systems
    assert list(report["env"]["systems"]) == ["none", "F+LR+AR+CS/bm25/5", "live"]
    assert all(row["n"] == 2 for row in report["env"]["systems"].values())
    assert 0.0 <= report["env"]["baselines"]["prior"] <= 100.0


def test_env_stats_take_options_without_a_config_file():
    result = run_lexrl("envs", "gdpr", "--stats", "--json", "--env.split_seed", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    stats = json.loads(result.stdout)
    assert stats["questions"] == 198 and stats["yes_no"] + stats["abcd"] == 198
    assert 0 < stats["random_baseline"] < stats["prior_baseline"] < 1


DEMO = str(Path(__file__).parents[1] / "configs" / "demo_cpu.yaml")


def _fails(capsys, argv: list[str]) -> tuple[int, str]:
    """The exit code and the first stderr line of `lexrl <argv>` run in this process."""
    from lexrl.cli import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return stop.value.code, err.splitlines()[0]


def _read_only_folder(tmp_path: Path) -> Path:
    """A folder this process cannot create anything in: a chmod-ed one, or for root, whom
    permission bits do not stop, /sys."""
    import os
    import tempfile

    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    if not os.access(folder, os.W_OK):
        return folder
    try:
        os.rmdir(tempfile.mkdtemp(dir="/sys"))
    except OSError:
        return Path("/sys")
    pytest.skip("no read-only folder to test with")


@pytest.mark.parametrize("command", ["train", "eval", "rollout"])
def test_an_output_dir_that_is_a_file_is_a_run_folder_error(tmp_path, capsys, command):
    (tmp_path / "taken").write_text("a file\n")
    for output_dir in (tmp_path / "taken", tmp_path / "taken" / "run"):
        code, line = _fails(capsys, [command, DEMO, "--run.output_dir", str(output_dir)])
        assert code == 7, line
        assert line == (
            f"run folder error: `run.output_dir` {output_dir}: {tmp_path / 'taken'} is a file, "
            "not a folder; set another `run.output_dir` or move the file"
        )


def test_an_output_dir_that_cannot_be_written_is_a_run_folder_error(tmp_path, capsys):
    folder = _read_only_folder(tmp_path)
    code, line = _fails(capsys, ["train", DEMO, "--run.output_dir", str(folder / "run")])
    assert code == 7, line
    assert line.startswith(f"run folder error: `run.output_dir` {folder / 'run'} cannot be written")
    assert str(folder) in line and "set another `run.output_dir`" in line
    assert not (folder / "run").exists()


def test_the_output_dir_check_leaves_nothing_behind(tmp_path):
    from lexrl.cli import check_output_dir

    check_output_dir(str(tmp_path / "new" / "run"))
    check_output_dir(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("command", "port"), [("serve-env", 70000), ("serve-env", -1), ("serve", 0)]
)
def test_a_port_out_of_range_is_a_config_error(capsys, command, port):
    code, line = _fails(capsys, [command, DEMO, "--port", str(port)])
    assert code == 2
    assert line.startswith(f"config error: --port {port}: out of range; give a port from")


@pytest.mark.parametrize("value", ["0", "-8", "nan", "inf", "0.5"])
def test_plan_refuses_a_gpu_memory_below_1_gib(capsys, value):
    code, line = _fails(capsys, ["plan", DEMO, "--gpu-memory", value])
    assert code == 8
    assert line.startswith(f"plan error: --gpu-memory {float(value):g}: give the GPU's memory")


@pytest.mark.parametrize("flag", ["--episodes", "--turns"])
def test_plan_refuses_no_episodes_or_turns(capsys, flag):
    code, line = _fails(capsys, ["plan", DEMO, flag, "0"])
    assert (code, line) == (8, f"plan error: {flag} 0: give at least 1")
