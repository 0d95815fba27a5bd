"""lexrl's envs as verifiers 0.4 environments (`lexrl.integrations.verifiers`): an episode played
through verifiers (its agents, harness, interception server and traces) sends the calls lexrl's
engine makes and records the rewards lexrl's engine gives the same replies; `vf-eval` runs a
lexrl env against a served SmolLM2 and reports lexrl's numbers."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

vf = pytest.importorskip("verifiers.v1", reason="pip install -e '.[verifiers]'")

from aiohttp import web  # noqa: E402 (verifiers brings aiohttp)

from lexrl.eval.evaluate import env_summaries, summarize  # noqa: E402
from lexrl.integrations.verifiers import (  # noqa: E402
    LexrlEnv,
    component_reward,
    load_environment,
    role_reward,
    summarize_episodes,
    trajectory_of,
)
from lexrl.policy import Messages, ScriptedPolicy, Teacher, conversation  # noqa: E402
from lexrl.rollout.engine import run_groups  # noqa: E402
from lexrl.types import Group, Task, Trajectory  # noqa: E402
from tests.served_smollm2 import MIXTURE_CONFIG, MIXTURE_TASKS  # noqa: E402

CONFIG = MIXTURE_CONFIG
MAX_NEW_TOKENS = 128
"""The config's `rollout.max_new_tokens`: a call that asks for no other limit gets it."""


@dataclass
class Call:
    """One agent call as lexrl's engine made it."""

    role: str
    messages: list[dict[str, str]]
    temperature: float
    max_new_tokens: int
    trainable: bool
    reply: str


class RecordingPolicy(ScriptedPolicy):
    """A ScriptedPolicy that keeps each call it answered."""

    def __init__(self, task: Task, teacher: Teacher, calls: list[Call]):
        super().__init__(None, task.id, teacher)
        self.calls = calls

    async def chat(
        self,
        role: str,
        system: str,
        messages: Messages,
        temperature: float = 1.0,
        trainable: bool = True,
        max_new_tokens: int | None = None,
    ) -> str:
        sent = conversation(system, messages)
        reply = await super().chat(role, system, messages, temperature, trainable, max_new_tokens)
        limit = max_new_tokens or MAX_NEW_TOKENS
        self.calls.append(Call(role, sent, temperature, limit, trainable, reply))
        return reply


def engine_episode(env: Any, task: Task, teacher: Teacher) -> tuple[Trajectory, list[Call]]:
    """The episode lexrl's own engine plays on `task` with `teacher`'s replies, and its calls."""
    calls: list[Call] = []
    (trajectory,) = run_groups(
        env, [task], 1, lambda t: RecordingPolicy(t, teacher, calls), progress=False
    )[0].trajectories
    return trajectory, calls


@dataclass
class Upstream:
    """A chat-completions endpoint answering from a teacher. Each role's seat pins the role as
    its model, so a request names the role that asks."""

    teacher: Teacher | None = None
    fail: bool = False
    """Refuse every request (400: the client does not retry it)."""
    requests: list[dict] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.fail or self.teacher is None:
            return web.json_response({"error": {"message": "refused"}}, status=400)
        text = self.teacher(body["model"], body["messages"][1:])
        return web.json_response(
            {
                "id": f"call-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )


@asynccontextmanager
async def served(upstream: Upstream) -> AsyncIterator[str]:
    """`upstream` on a free local port; its base URL."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", upstream.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def verifiers_env(member: str, max_tasks: int = 3) -> LexrlEnv:
    """The verifiers env of one member of the mixture config, each role's seat pinned to a
    model named after the role."""
    roles = load_environment(CONFIG, max_tasks=max_tasks, member=member).lexrl.env.roles
    return load_environment(
        CONFIG,
        max_tasks=max_tasks,
        member=member,
        roles={role: {"model": role} for role in roles},
        summary=False,
    )


def context(base_url: str) -> vf.ModelContext:
    return vf.ModelContext(
        model="policy", client=vf.EvalClientConfig(base_url=base_url), sampling=vf.SamplingConfig()
    )


async def play(
    venv: LexrlEnv, upstream: Upstream, teachers: Callable[[Task], Teacher]
) -> tuple[list[vf.Episode], list[list[dict]]]:
    """One verifiers episode on each of the env's tasks, answered by `teachers(task)`; the
    episodes and the requests each sent upstream."""
    episodes, sent = [], []
    async with served(upstream) as base_url, venv.serving():
        for row in venv.taskset:
            upstream.teacher = teachers(venv.lexrl.lexrl_tasks[row.data.id])
            upstream.requests = []
            episodes.append(await venv.run_episode(row, context(base_url)))
            sent.append(upstream.requests)
    return episodes, sent


def score(trace: vf.Trace, name: str) -> float:
    reward = trace.rewards[name]
    assert reward is not None
    return reward.score


@pytest.mark.parametrize("member", ["statute", "argument", "gdpr", "lexam"])
def test_an_episode_through_verifiers_scores_as_the_engine_on_the_same_replies(member):
    venv = verifiers_env(member)
    env = venv.lexrl.env
    episodes, requests = asyncio.run(
        play(venv, Upstream(), lambda task: env.teacher(task, random.Random(7)))
    )
    tasks = list(venv.lexrl.lexrl_tasks.values())
    assert len(episodes) == len(tasks) == 3
    engine_groups = []
    for episode, task, sent in zip(episodes, tasks, requests, strict=True):
        engine, calls = engine_episode(env, task, env.teacher(task, random.Random(7)))
        engine_groups.append(Group(task, [engine]))
        assert episode.ok, episode.errors
        assert engine.failed is None
        traces = episode.traces
        # The same calls, in order: role, messages, sampling, trainable, reply.
        assert [t.agent.name for t in traces] == [c.role for c in calls]
        assert [t.task.data.turn for t in traces] == list(range(len(calls)))
        assert [r["messages"] for r in sent] == [c.messages for c in calls]
        assert [r["temperature"] for r in sent] == [c.temperature for c in calls]
        assert [r["max_tokens"] for r in sent] == [c.max_new_tokens for c in calls]
        assert [t.agent.trainable for t in traces] == [c.trainable for c in calls]
        assert [t.assistant_messages[-1].content for t in traces] == [c.reply for c in calls]
        # The same reward, components, role rewards and metrics on every trace.
        roles = {c.role for c in calls if c.trainable}
        for trace in traces:
            assert trace.reward == engine.reward == score(trace, "reward")
            assert trace.rewards["reward"].weight == 1.0
            components = {n: score(trace, component_reward(n)) for n in engine.components}
            assert components == engine.components
            own = {role: score(trace, role_reward(role)) for role in roles}
            assert own == {role: engine.role_rewards.get(role, engine.reward) for role in roles}
            assert set(trace.rewards) == {"reward", *map(component_reward, components)} | {
                role_reward(role) for role in roles
            }
            assert all(r.weight == 0.0 for n, r in trace.rewards.items() if n != "reward")
            assert trace.metrics == engine.metrics
        assert trajectory_of(episode).reward == engine.reward
    # The summary it prints is `lexrl eval`'s of the engine's episodes.
    by_id = venv.lexrl.lexrl_tasks
    assert summarize_episodes(env, by_id, episodes) == env_summaries(env, tasks, engine_groups)


def test_a_failed_call_fails_the_episode_with_no_reward():
    venv = verifiers_env("gdpr", max_tasks=1)
    episodes, _ = asyncio.run(play(venv, Upstream(fail=True), lambda task: None))
    (episode,) = episodes
    assert not episode.ok
    assert "meta call 0" in episode.errors[-1].message
    assert all(not trace.rewards for trace in episode.traces)
    # Counted as lexrl counts an episode without a reward, not averaged as a 0.
    (task,) = venv.lexrl.lexrl_tasks.values()
    failed = Group(task, [Trajectory(task.id, failed="call failed")])
    summary, _ = summarize_episodes(venv.lexrl.env, venv.lexrl.lexrl_tasks, episodes)
    assert summary == summarize([failed]) and "reward" not in summary


def test_an_episode_lexrl_could_not_score_fails_with_no_reward(monkeypatch):
    venv = verifiers_env("lexam", max_tasks=1)
    env = venv.lexrl.env
    played = env.run_episode

    async def unscored(task: Task, policy: Any) -> Trajectory:
        trajectory = await played(task, policy)
        trajectory.failed = "judge unreachable"
        return trajectory

    monkeypatch.setattr(env, "run_episode", unscored)
    (episode,), _ = asyncio.run(
        play(venv, Upstream(), lambda task: env.teacher(task, random.Random(7)))
    )
    assert not episode.ok
    assert "judge unreachable" in episode.errors[-1].message
    assert episode.traces and all(not trace.rewards for trace in episode.traces)
    assert trajectory_of(episode).failed


def test_roles_of_no_seat_are_refused():
    with pytest.raises(ValueError, match="not roles of this env"):
        load_environment(CONFIG, max_tasks=1, member="gdpr", roles={"nobody": {"model": "x"}})


def replayed(episode: Any) -> Teacher:
    """A teacher giving the replies of a saved episode's agent calls, in the order made."""
    traces = sorted(episode.traces, key=lambda trace: trace.task.data.turn)
    replies = iter([trace.assistant_messages[-1].content or "" for trace in traces])
    return lambda role, messages: next(replies)


@pytest.fixture(scope="module")
def lexrl_eval_report(mixture_eval) -> tuple[dict, dict[str, list[str]]]:
    """`lexrl eval` of the mixture through the `openai` backend on the same server, tasks and
    sampling as the vf-eval runs below: its report, and each task's replies in order."""
    replies = {}
    for row in mixture_eval.rows:
        turns = row["trajectories"][0]["turns"]
        replies[row["task"]["id"]] = [turn["text"] for turn in turns if turn["trainable"]]
    return mixture_eval.report, replies


@pytest.mark.slow
@pytest.mark.parametrize("member", ["gdpr", "lexam"])
def test_vf_eval_runs_a_lexrl_env_on_a_served_model_and_reports_lexrl_rewards(
    smollm2_server, lexrl_eval_report, tmp_path: Path, member: str
):
    out = tmp_path / "vf"
    command = [
        sys.executable,
        "-m",
        "lexrl.integrations.verifiers",
        "--env.taskset.config",
        CONFIG,
        "--env.taskset.member",
        member,
        "--env.taskset.max-tasks",
        str(MIXTURE_TASKS),
        "--env.taskset.overrides",
        json.dumps(["--rollout.max_new_tokens", "48"]),
        "-m",
        smollm2_server.model,
        "--client.base-url",
        smollm2_server.base_url,
        "--sampling.temperature",
        "0",
        "--no-push",
        "--no-rich",
        "-o",
        str(out),
        "--run.dir",
        "run",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (out / "run" / "traces.jsonl").read_text().splitlines()
    episodes = [vf.WireEpisode.model_validate(json.loads(line)) for line in lines]
    venv = load_environment(
        CONFIG, max_tasks=MIXTURE_TASKS, member=member, overrides=["--rollout.max_new_tokens", "48"]
    )
    env, tasks = venv.lexrl.env, venv.lexrl.lexrl_tasks
    assert sorted(e.task.data.id for e in episodes) == sorted(tasks)
    groups = []
    for episode in episodes:
        assert episode.ok, episode.errors
        task = tasks[episode.task.data.id]
        engine, calls = engine_episode(env, task, replayed(episode))
        groups.append(Group(task, [engine]))
        assert len(calls) == len(episode.traces)
        assert all(r["max_tokens"] == 48 for t in episode.traces for r in sent_sampling(t))
        for trace in episode.traces:
            assert trace.reward == engine.reward
            assert {n: trace.rewards[component_reward(n)].score for n in engine.components} == (
                engine.components
            )
            assert trace.metrics == engine.metrics
    summary, _ = summarize_episodes(env, tasks, episodes)
    lexrl_summary, _ = env_summaries(env, [g.task for g in groups], groups)
    assert summary == lexrl_summary
    # vf-eval printed lexrl eval's table: the mean reward to four decimals.
    assert f"{lexrl_summary['reward']:.4f}" in done.stdout
    # And `lexrl eval` of the same tasks, greedy, through the same server: the same replies,
    # hence the same numbers. Greedy decoding leaves only the server's batching, which can
    # break a near-tie differently in a reply; the numbers must then differ by that reply alone.
    report, lexrl_replies = lexrl_eval_report
    vf_replies = {
        # A member played alone keeps its own ids; the mixture's name their member.
        f"{member}:{episode.task.data.id}": [
            trace.assistant_messages[-1].content or ""
            for trace in sorted(episode.traces, key=lambda trace: trace.task.data.turn)
        ]
        for episode in episodes
    }
    assert vf_replies.keys() == {k for k in lexrl_replies if k.startswith(f"{member}:")}
    same = [task for task in vf_replies if vf_replies[task] == lexrl_replies[task]]
    assert len(same) >= 3, (vf_replies, lexrl_replies)
    if len(same) == len(vf_replies):
        # Equal up to the order the means were summed in.
        assert summary == pytest.approx(report["envs"][member]["summary"], rel=1e-12)


def sent_sampling(trace: Any) -> Iterator[dict]:
    """The sampling of each model call a saved trace made, as sent upstream."""
    for call in trace.calls:
        yield call.sampling.model_dump()
