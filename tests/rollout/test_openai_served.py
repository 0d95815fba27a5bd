"""`lexrl eval` of a served model through the `openai` backend against a real vLLM server of
SmolLM2 (`lexrl serve`): every env of the CPU mixture in one report with the server's token ids,
and the same greedy replies and parse rates as the `hf` backend on the same model. That a
server killed mid-evaluation costs counted episodes, not the evaluation, is checked with the
judge's loss of it (tests/rewards/test_judge_served.py), on the same server."""

from __future__ import annotations

import pytest

from tests.rollout.vllm_fixtures import VLLM_MISSING
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


def test_greedy_replies_and_parse_rates_match_the_hf_backend(
    lexrl_in_process, smollm2_server, model_cache, tmp_path
):
    common = [
        "--eval.max_tasks", "10",
        "--eval.samples_per_task", "1",
        "--eval.greedy", "true",
        "--eval.degenerate_baselines", "false",
    ]  # fmt: skip
    served = lexrl_in_process(
        "eval",
        "configs/lexam_cpu.yaml",
        *openai_options(smollm2_server.base_url, smollm2_server.model, tmp_path / "cache"),
        *common,
        "--run.output_dir", str(tmp_path / "served"),
    )  # fmt: skip
    assert served.returncode == 0, served.stderr[-4000:]
    local = lexrl_in_process(
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
    compared = lexrl_in_process("compare", str(tmp_path / "local"), str(tmp_path / "served"))
    assert compared.returncode == 0, compared.stderr
    header = compared.stdout.splitlines()[2]
    assert "A: base (" in header and "B: smollm2 (" in header
