"""`lexrl eval` of a served model through the `openai` backend against a real vLLM server of
SmolLM2 (`lexrl serve`): every env of the CPU mixture in one report with the server's token ids,
the same greedy replies and parse rates as the `hf` backend on the same model, and a server
killed mid-evaluation costing counted episodes, not the evaluation."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.e2e import lexrl_command, run_lexrl
from tests.rollout.vllm_fixtures import (
    VLLM_MISSING,
    kill_all,
    server_tree,
    stop_server,
)
from tests.served_smollm2 import MIXTURE_TASKS, openai_options, report_of

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = pytest.mark.slow


def test_every_env_of_the_mixture_is_evaluated_in_one_report(mixture_eval):
    report, rows = mixture_eval.report, mixture_eval.rows
    assert report["system"] == "smollm2"
    assert set(report["envs"]) == {"statute", "argument", "gdpr", "lexam"}
    for name, entry in report["envs"].items():
        assert entry["tasks"] == entry["summary"]["episodes"] == MIXTURE_TASKS, name
        assert entry["degenerate_baselines"], name
    turns = [turn for row in rows for t in row["trajectories"] for turn in t["turns"]]
    policy_turns = [turn for turn in turns if turn["adapter_version"] == 0]
    assert policy_turns
    for turn in policy_turns:
        # The server's own tokenization of the chat and of the reply, with the sampler's
        # log-probs: what a trainer needs.
        assert turn["prompt_ids"] and turn["completion_ids"]
        assert len(turn["completion_ids"]) == len(turn["logprobs"])
        assert all(value <= 0.0 for value in turn["logprobs"])


def test_greedy_replies_and_parse_rates_match_the_hf_backend(smollm2_server, model_cache, tmp_path):
    common = [
        "--eval.max_tasks", "10",
        "--eval.samples_per_task", "1",
        "--eval.greedy", "true",
        "--eval.degenerate_baselines", "false",
    ]  # fmt: skip
    served = run_lexrl(
        "eval",
        "configs/lexam_cpu.yaml",
        *openai_options(smollm2_server.base_url, smollm2_server.model, tmp_path / "cache"),
        *common,
        "--run.output_dir", str(tmp_path / "served"),
    )  # fmt: skip
    assert served.returncode == 0, served.stderr[-4000:]
    local = run_lexrl(
        "eval",
        "configs/lexam_cpu.yaml",
        "--model.cache_dir", model_cache,
        *common,
        "--run.output_dir", str(tmp_path / "local"),
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-4000:]
    (served_report, served_rows), (local_report, local_rows) = (
        report_of(tmp_path / "served"),
        report_of(tmp_path / "local"),
    )

    def replies(rows: list[dict]) -> dict[str, str]:
        return {row["task"]["id"]: row["trajectories"][0]["turns"][0]["text"] for row in rows}

    served_replies, local_replies = replies(served_rows), replies(local_rows)
    assert served_replies.keys() == local_replies.keys() and len(served_replies) == 10
    # Greedy decoding of the same weights: vLLM's and transformers' kernels may break a near tie
    # differently, so a few replies may differ; most must not.
    same = sum(served_replies[k] == local_replies[k] for k in served_replies)
    assert same >= 8, (served_replies, local_replies)
    served_parsed = served_report["summary"]["parsed"]
    local_parsed = local_report["summary"]["parsed"]
    assert abs(served_parsed - local_parsed) <= 0.2, (served_parsed, local_parsed)
    compared = run_lexrl("compare", str(tmp_path / "local"), str(tmp_path / "served"))
    assert compared.returncode == 0, compared.stderr
    header = compared.stdout.splitlines()[2]
    assert "A: base (" in header and "B: smollm2 (" in header


@pytest.mark.kills_served_smollm2
def test_a_server_killed_mid_evaluation_costs_counted_episodes(smollm2_server, tmp_path):
    """The session's server, killed: the collection hook runs this after every test using it."""
    serve, base_url = smollm2_server.process, smollm2_server.base_url
    cache = tmp_path / "cache"
    evaluation = subprocess.Popen(
        lexrl_command(
            "eval",
            "configs/lexam_cpu.yaml",
            *openai_options(base_url, smollm2_server.model, cache),
            "--rollout.chat_concurrency",
            "2",
            "--rollout.chat_max_retries",
            "1",
            "--rollout.chat_timeout_s",
            "20",
            "--eval.degenerate_baselines",
            "false",
            "--run.output_dir",
            str(tmp_path / "run"),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tree = server_tree(serve)
    try:
        deadline = time.monotonic() + 600
        while len(list(cache.rglob("*.json"))) < 10 and time.monotonic() < deadline:
            assert evaluation.poll() is None, evaluation.communicate()
            time.sleep(0.2)
        kill_all([*tree])
        serve.kill()
        stdout, stderr = evaluation.communicate(timeout=600)
    finally:
        stop_server(serve)
        if evaluation.poll() is None:
            evaluation.kill()
    # most episodes fail after the kill, past eval.max_failed_share: exit 9, report written first
    assert evaluation.returncode == 9, stderr[-4000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("run error: ") and f"policy {base_url}: " in last
    report, rows = report_of(tmp_path / "run")
    summary = report["summary"]
    # 43 held-out questions (split by facts) x 4 samples, every one accounted for
    assert len(rows) == 43 and summary["episodes"] == 4 * 43
    answered = len(list(cache.rglob("*.json")))
    assert summary["failed_episodes"] == 4 * 43 - answered
    assert 10 <= answered < 4 * 43
    failures = {
        t["failed"].split(":")[0] for row in rows for t in row["trajectories"] if t["failed"]
    }
    assert failures == {"policy http"}
