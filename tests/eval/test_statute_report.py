import asyncio
import json
import random
import re
from functools import partial

import httpx
import numpy as np
import pytest

from lexrl.config import Config
from lexrl.eval import statute_report as report_module
from lexrl.eval.statute_report import statute_report, task_means
from lexrl.rollout.policy import ScriptedPolicy
from lexrl.types import Group
from tests.eval.test_ranking import direct


@pytest.fixture(scope="module")
def scripted_groups(statute_env, tiny_model_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    rng = random.Random(0)
    tasks = statute_env.tasks("test")[:6]

    async def play(task):
        return await asyncio.gather(
            *(
                statute_env.run_episode(
                    task, ScriptedPolicy(tokenizer, task.id, statute_env.teacher(task, rng))
                )
                for _ in range(2)
            )
        )

    return tasks, [Group(task, list(asyncio.run(play(task)))) for task in tasks]


def reversing_llm(request):
    """Selects the first three candidates in reverse order (or refuses when told to)."""
    user = json.loads(request.content)["messages"][1]["content"]
    shown = len(re.findall(r"^\[\d+\]", user, flags=re.MULTILINE))
    content = json.dumps({"indices": list(range(min(3, shown)))[::-1]})
    return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})


def test_task_means_average_samples_before_the_interval():
    per_sample = {"recall@1": {"a#0": 1.0, "a#1": 0.0, "b#0": 1.0, "b#1": 1.0}}
    assert task_means(per_sample) == {"recall@1": {"a": 0.5, "b": 1.0}}


def test_policy_report_matches_the_env_metrics_and_direct_formulas(
    statute_env, scripted_groups, tmp_path
):
    tasks, groups = scripted_groups
    config = Config()
    config.eval.ks = [3, 10]
    config.eval.baselines = ["bm25"]
    report = statute_report(statute_env, tasks, config, groups, "scripted", tmp_path)
    policy = report["systems"]["scripted"]
    mas = np.mean([t.metrics["mas_recall"] for g in groups for t in g.trajectories])
    assert policy["mas_recall@14"]["mean"] == pytest.approx(mas)
    for k in (3, 10):
        expected = np.mean(
            [
                np.mean(
                    [direct(t.outcome["pool"], g.task.gold, k)[f"ndcg@{k}"] for t in g.trajectories]
                )
                for g in groups
            ]
        )
        assert policy[f"ndcg@{k}"]["mean"] == pytest.approx(expected)
        assert policy[f"ndcg@{k}"]["low"] <= expected <= policy[f"ndcg@{k}"]["high"]
    assert "bm25" in report["systems"] and report["queries"] == 6
    saved = json.loads((tmp_path / "eval_test_report.json").read_text())
    assert saved["systems"] == report["systems"]
    markdown = (tmp_path / "eval_test_report.md").read_text()
    assert (
        "| scripted |" in markdown and "| bm25 |" in markdown and "built-in demo world" in markdown
    )


def test_final_llm_reranker_orders_the_pool(statute_env, scripted_groups, tmp_path, monkeypatch):
    tasks, groups = scripted_groups
    monkeypatch.setattr(
        report_module,
        "LLMReranker",
        partial(report_module.LLMReranker, transport=httpx.MockTransport(reversing_llm)),
    )
    config = Config()
    config.eval.final_reranker.model = "qwen-max"
    config.eval.final_reranker.base_url = "http://api.test/v1"
    report = statute_report(statute_env, tasks, config, groups, "policy", tmp_path)
    assert report["notes"]["policy"]["final_reranker"]["unparsable_after_retries"] == 0
    records = [json.loads(line) for line in (tmp_path / "eval_test.jsonl").open()]
    for record in records:
        for trajectory in record["trajectories"]:
            pool = trajectory["outcome"]["pool"]
            top = min(3, len(pool))
            assert trajectory["final_ranking"] == pool[:top][::-1] + pool[top:]
            assert trajectory["final_reranker"]["selected"] == top
    expected = np.mean(
        [
            np.mean(
                [
                    direct(t["final_ranking"], r["task"]["gold"], 10)["mrr@10"]
                    for t in r["trajectories"]
                ]
            )
            for r in records
        ]
    )
    assert report["systems"]["policy"]["mrr@10"]["mean"] == pytest.approx(expected)
