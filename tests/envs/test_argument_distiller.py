"""The paper's Factor Distiller (`extract_factors: llm`, Zhang and Ashley 2025, arXiv:2506.02992,
sec. 4.4 and Appendix A) against a local OpenAI-compatible endpoint that answers in the authors'
format: the `_text` metrics are the authors' values on fixed replies, a ply it fails on is
counted and excluded, and `reward_source: distiller` rewards the prose; once against the served
SmolLM2 for the plumbing."""

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from transformers import AutoTokenizer

from lexrl.envs.argument.env import DISTILLER_KEYS, ArgumentEnv, to_task
from lexrl.envs.argument.factors import FACTORS
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.argument.parsing import parse_ply
from lexrl.envs.argument.scenarios import TABLE_1
from lexrl.envs.argument.teacher import teacher_plies, teacher_text
from lexrl.errors import ConfigError
from lexrl.eval.evaluate import summarize
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge import JudgeConfig
from lexrl.train.trainer import metric_keys_of, metric_means, step_metrics
from lexrl.types import Group
from tests.env_options import load_env

AUTHORS_NAMES = {"c1": "Input Case", "c2": "TSC1", "c3": "TSC2"}
TEACHER = [json.loads(teacher_text(ply)) for ply in teacher_plies(TABLE_1)]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


@contextmanager
def distiller_server(answer: Callable[[dict], tuple[int, str]]) -> Iterator[tuple[str, list]]:
    """A local chat endpoint: `answer(request body) -> (status, reply text)`; yields its base
    URL and the list of request bodies it received."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            status, text = answer(body)
            message = {"role": "assistant", "content": text}
            choice = {"index": 0, "finish_reason": "stop", "message": message}
            payload = {"id": "c", "object": "chat.completion", "created": 0, "choices": [choice]}
            data = json.dumps(payload if status == 200 else {"error": text}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def authors_reply(lists: dict[str, list[str]], names: bool = True) -> str:
    """The distiller's answer as the authors' prompt has it: factors with their name and side
    ("F4 Agreed-not-to-disclose (P)"), the cases "Input Case", "TSC1", "TSC2" (or c1-c3)."""

    def entry(factor: str) -> str:
        known = FACTORS.get(factor)
        return f"{factor} {known.name} ({known.favors})" if known else factor

    body = {(AUTHORS_NAMES[c] if names else c): [entry(f) for f in ids] for c, ids in lists.items()}
    return f"Output JSON: {json.dumps(body)}"


def the_ply(body: dict) -> tuple[str, str]:
    """The (key, prose) of the one ply a distiller request carries."""
    ((key, prose),) = json.loads(body["messages"][1]["content"]).items()
    return key, prose


def distiller_env(url: str, tmp_path, **options) -> ArgumentEnv:
    judge = JudgeConfig(url, "distiller", max_retries=0, max_parse_retries=1)
    config = ArgumentEnvConfig(
        workflow="MA",
        extract_factors="llm",
        judges=[judge],
        judge_cache_dir=str(tmp_path / "judge_cache"),
        **options,
    )
    return ArgumentEnv(config)


def play(env: ArgumentEnv, tokenizer, prose: list[str]):
    """One MA episode of Table 1 whose plies are the teacher's claims with `prose` as their
    `argument`; a fresh judge client per event loop."""
    env._scenarios[TABLE_1.id] = TABLE_1
    task = to_task(TABLE_1)

    def respond(role, messages):
        index = int(re.search(r"Write ply (\d) of 3", messages[0]["content"]).group(1)) - 1
        return json.dumps({**TEACHER[index], "argument": prose[index]})

    async def episode():
        try:
            return await env.run_episode(task, ScriptedPolicy(tokenizer, task.id, respond))
        finally:
            if "judge_client" in env.__dict__:
                await env.__dict__.pop("judge_client").aclose()

    return task, asyncio.run(episode())


PROSE = ["Plaintiff's prose.", "Defendant's prose.", "Rebuttal's prose."]
# Fixed distiller readings of Table 1 (c1 F4 F5 F23; c2 F2 F4 F16; c3 F2 F5 F12, N_gt 9): the
# defendant's puts F7 in c3, the rebuttal's F4 in c3, two attributions the cases lack.
READINGS = {
    DISTILLER_KEYS[0]: {"c1": ["F4"], "c2": ["F4"], "c3": []},
    DISTILLER_KEYS[1]: {"c1": ["F5"], "c2": ["F16"], "c3": ["F5", "F7"]},
    DISTILLER_KEYS[2]: {"c1": ["F4"], "c2": [], "c3": ["F12", "F4"]},
}


def test_the_text_metrics_are_the_authors_values_on_fixed_distiller_replies(tokenizer, tmp_path):
    def answer(body):
        key, _ = the_ply(body)
        return 200, authors_reply(READINGS[key], names=key != DISTILLER_KEYS[1])

    with distiller_server(answer) as (url, seen):
        env = distiller_env(url, tmp_path)
        _, trajectory = play(env, tokenizer, PROSE)
    claims_only = play(ArgumentEnv(ArgumentEnvConfig(workflow="MA")), tokenizer, PROSE)[1]

    # Each ply alone, in the authors' input form, under the authors' prompt.
    assert sorted(the_ply(body) for body in seen) == sorted(zip(DISTILLER_KEYS, PROSE, strict=True))
    assert {body["messages"][0]["content"] for body in seen} == {env.prompts["extractor"]}
    assert trajectory.failed is None and trajectory.metrics["distiller_failed"] == 0.0
    # Union per case: c1 {F4, F5}, c2 {F4, F16}, c3 {F4, F5, F7, F12}: N_ext 8, N_h 2
    # (F4 and F7 for c3), N_util 6, N_gt 9 (Zhang and Ashley 2025, eq. 1-5; their code's Acc_H
    # divides by the factors cited).
    expected = {
        "hallucination_accuracy_text": 1 - 2 / 9,
        "utilisation_recall_text": 6 / 9,
        "authors_hallucination_accuracy_text": 1 - 2 / 8,
        "authors_factor_recall_text": 6 / 9,
        "authors_successful_abstention_text": 0.0,
    }
    assert {k: trajectory.metrics[k] for k in expected} == pytest.approx(expected)
    # The claims' metrics and the reward are the claims', whatever the distiller read.
    assert trajectory.reward == claims_only.reward
    assert trajectory.metrics["hallucination_accuracy"] == 1.0
    extractor = [turn for turn in trajectory.turns if turn.role == "extractor"]
    assert len(extractor) == 3 and not any(turn.trainable for turn in extractor)
    assert "distiller_failed" in env.episode_metrics


def test_a_ply_the_distiller_fails_on_is_counted_and_its_episode_keeps_its_reward(
    tokenizer, tmp_path
):
    def answer(body):
        key, prose = the_ply(body)
        if prose == "Unreadable.":
            return 200, "I cannot tell which factors these are."
        if prose == "Server down.":
            return 500, "down"
        return 200, authors_reply(READINGS[key])

    with distiller_server(answer) as (url, seen):
        env = distiller_env(url, tmp_path)
        task, good = play(env, tokenizer, PROSE)
        _, unparsable = play(env, tokenizer, [PROSE[0], "Unreadable.", PROSE[2]])
        _, down = play(env, tokenizer, ["Server down.", PROSE[1], PROSE[2]])
    # The first episode's replies are cached: the others ask only for the new prose, the
    # unparsable one asked again once (`max_parse_retries: 1`), the 500 not retried.
    assert len(seen) == 3 + 2 + 1

    for failed, reason in ((unparsable, "unparsable after 2 replies"), (down, "500")):
        assert failed.failed is None and failed.reward == good.reward
        assert failed.metrics["distiller_failed"] == 1.0
        assert not [key for key in failed.metrics if key.endswith("_text")]
        (step,) = [step["extractor"] for step in failed.steps if "extractor" in step]
        assert step["error"].startswith(url) and reason in step["error"]
    # A mean over the episodes: a `_text` metric over the episodes that report it, the
    # failures as a share, in an evaluation's summary and in a training step's log alike.
    groups = [Group(task, [good, unparsable, down])]
    summary = summarize(groups)
    sums = step_metrics(groups, env)
    logged = metric_means({key: sums.get(key, 0.0) for key in metric_keys_of(env)})
    text = good.metrics["hallucination_accuracy_text"]
    assert (
        summary["hallucination_accuracy_text"] == logged["env/hallucination_accuracy_text"] == text
    )
    assert summary["distiller_failed"] == logged["env/distiller_failed"] == pytest.approx(2 / 3)


def test_the_distiller_as_reward_source_rewards_the_prose(tokenizer, tmp_path):
    claimed = [parse_ply(teacher_text(ply)).factors for ply in teacher_plies(TABLE_1)]
    faithful = [f"Faithful {i}." for i in range(3)]
    fabricated = [f"Fabricated {i}." for i in range(3)]

    def answer(body):
        key, prose = the_ply(body)
        lists = {case: list(ids) for case, ids in claimed[DISTILLER_KEYS.index(key)].items()}
        if prose in fabricated:  # the prose also says c2 has F5, which it lacks
            lists["c2"].append("F5")
        if prose == "Server down.":
            return 500, "down"
        return 200, authors_reply(lists, names=False)

    rewards = {}
    with distiller_server(answer) as (url, seen):
        for source in ("claims", "distiller"):
            env = distiller_env(url, tmp_path / source, reward_source=source)
            for name, prose in (("faithful", faithful), ("fabricated", fabricated)):
                _, trajectory = play(env, tokenizer, prose)
                assert trajectory.failed is None
                rewards[source, name] = trajectory.reward
        _, down = play(env, tokenizer, ["Server down.", *faithful[1:]])
        assert len(seen) == 2 * 6 + 1  # the last episode's faithful plies come from the cache
    claims_reward = rewards["claims", "faithful"]
    assert rewards["claims", "fabricated"] == claims_reward
    # Read back exactly, the teacher's citations score as its claims do; a fabricated
    # attribution in the prose costs.
    assert rewards["distiller", "faithful"] == pytest.approx(claims_reward)
    assert rewards["distiller", "fabricated"] < claims_reward
    # With the distiller as the reward's source, a ply it fails on leaves no reward.
    assert down.failed.startswith(f"factor distiller failed: {url}")
    assert down.components == {} and down.reward == 0.0


def test_a_ply_without_prose_costs_no_call(tokenizer, tmp_path):
    with distiller_server(lambda body: (200, authors_reply(READINGS[the_ply(body)[0]]))) as (
        url,
        seen,
    ):
        _, trajectory = play(distiller_env(url, tmp_path), tokenizer, [PROSE[0], " ", PROSE[2]])
    assert sorted(the_ply(body)[0] for body in seen) == [DISTILLER_KEYS[0], DISTILLER_KEYS[2]]
    assert trajectory.metrics["distiller_failed"] == 0.0
    assert trajectory.outcome["distilled"][1] == {"c1": (), "c2": (), "c3": ()}


def test_the_distiller_as_reward_source_needs_the_distiller():
    judges = [{"base_url": "http://127.0.0.1:9/v1", "model": "distiller"}]
    with pytest.raises(ConfigError, match=r"`env.reward_source`: `distiller` needs"):
        load_env("argument", reward_source="distiller", judges=judges)
    with pytest.raises(ConfigError, match=r"`env.reward_source`"):
        load_env("argument", reward_source="prose")
    load_env("argument", reward_source="distiller", extract_factors="llm", judges=judges)


@pytest.mark.slow
def test_the_served_smollm2_as_distiller_plumbing(smollm2_server, tokenizer, tmp_path):
    """SmolLM2-135M is no capable distiller; what is checked is that each ply reaches it and
    that its replies, parsable or not, end as `_text` metrics or counted failures."""
    judge = JudgeConfig(smollm2_server.base_url, smollm2_server.model, max_tokens=96,
                        timeout_s=300, max_retries=1, max_parse_retries=0)  # fmt: skip
    env = ArgumentEnv(
        ArgumentEnvConfig(workflow="MA", extract_factors="llm", judges=[judge],
                          judge_cache_dir=str(tmp_path / "judge_cache"))
    )  # fmt: skip
    _, trajectory = play(env, tokenizer, [ply["argument"] for ply in TEACHER])
    # The server is up: every ply gets a reply, and a failure is only its unparsable replies.
    replies = [turn for turn in trajectory.turns if turn.role == "extractor"]
    failures = [step["extractor"] for step in trajectory.steps if "extractor" in step]
    assert trajectory.failed is None and len(replies) == 3
    for failure in failures:
        assert failure["error"].startswith(f"{smollm2_server.base_url}: unparsable after")
    texts = [key for key in trajectory.metrics if key.endswith("_text")]
    assert (trajectory.metrics["distiller_failed"], len(texts)) == (
        (1.0, 0) if failures else (0.0, 5)
    )
    print(
        f"\nSmolLM2-135M as distiller on the teacher's Table 1 plies: {len(failures)} of 3 plies"
        f" unparsable after {max((f['attempts'] for f in failures), default=0)} replies; last: "
        + " | ".join(repr(turn.text[:60]) for turn in replies)
    )
