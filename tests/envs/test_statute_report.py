import asyncio
import copy
import dataclasses
import json
import random
import re
from functools import partial

import httpx
import numpy as np
import pytest

from lexrl.envs.base import ReportRequest
from lexrl.envs.statute import report as report_module
from lexrl.envs.statute.options import FinalRerankerConfig, StatuteEvalConfig
from lexrl.envs.statute.report import statute_report, task_means
from lexrl.policy import ScriptedPolicy
from lexrl.types import Group
from tests.envs.test_statute_ranking import direct


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


def evaluated_by(env, **settings):
    """A copy of `env` whose `env.statute.eval` has `settings` (the shared fixture stays as it
    is)."""
    evaluated = copy.copy(env)
    evaluated.config = dataclasses.replace(env.config, eval=StatuteEvalConfig(**settings))
    return evaluated


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
    env = evaluated_by(statute_env, ks=[3, 10], baselines=["bm25"])
    request = ReportRequest("test", "scripted", tmp_path)
    written = statute_report(env, tasks, groups, request)
    report = written.data
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
    assert len((tmp_path / "baseline_bm25_test.jsonl").read_text().splitlines()) == 6
    markdown = written.markdown
    assert "| metric | scripted | bm25 |" in markdown and "built-in demo world" in markdown


def test_final_llm_reranker_orders_the_pool(statute_env, scripted_groups, tmp_path, monkeypatch):
    tasks, groups = scripted_groups
    monkeypatch.setattr(
        report_module,
        "LLMReranker",
        partial(report_module.LLMReranker, transport=httpx.MockTransport(reversing_llm)),
    )
    reranker = FinalRerankerConfig(model="qwen-max", base_url="http://api.test/v1")
    env = evaluated_by(statute_env, final_reranker=reranker)
    report = statute_report(env, tasks, groups, ReportRequest("test", "policy", tmp_path)).data
    assert report["notes"]["policy"]["final_reranker"]["unparsable_after_retries"] == 0
    lines = (tmp_path / "eval_test_final_rankings.jsonl").open()
    records = [json.loads(line) for line in lines]
    assert len(records) == sum(len(g.trajectories) for g in groups)
    rankings = {}
    for record, (group, trajectory) in zip(
        records, [(g, t) for g in groups for t in g.trajectories], strict=True
    ):
        assert record["task_id"] == group.task.id
        pool = trajectory.outcome["pool"]
        top = min(3, len(pool))
        assert record["final_ranking"] == pool[:top][::-1] + pool[top:]
        assert record["final_reranker"]["selected"] == top
        rankings.setdefault(group.task.id, []).append(record["final_ranking"])
    expected = np.mean(
        [
            np.mean([direct(r, g.task.gold, 10)["mrr@10"] for r in rankings[g.task.id]])
            for g in groups
        ]
    )
    assert report["systems"]["policy"]["mrr@10"]["mean"] == pytest.approx(expected)
