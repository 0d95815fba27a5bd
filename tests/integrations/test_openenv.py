"""`lexrl serve-env` as an OpenEnv environment server: openenv-core's own clients play whole
episodes over its WebSocket sessions, and every reward, component and role reward equals what
lexrl's own rollout engine gives for the same replies (scripted teachers here; a served vLLM
model in the slow test)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import signal
import subprocess
import time
from collections.abc import Callable

import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed: pip install -e '.[openenv]'")

from openenv.core import GenericEnvClient
from websockets.exceptions import ConnectionClosed

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.integrations.episode import EpisodeResult
from lexrl.integrations.openenv_client import LexrlEnvClient, play
from lexrl.integrations.openenv_server import AgentObservation, AgentReply
from lexrl.policy import ScriptedPolicy
from lexrl.rollout.engine import run_groups
from lexrl.types import Task, Trajectory
from tests.e2e import lexrl_command
from tests.rollout.vllm_fixtures import free_port

CONFIG = "configs/legal_mix_cpu.yaml"
MEMBERS = ("statute", "argument", "gdpr", "lexam")
MAX_SESSIONS = 4


@pytest.fixture(scope="module")
def mixture():
    return make_env(load_config(CONFIG, []).env)


@pytest.fixture(scope="module")
def served_env(tmp_path_factory):
    """`lexrl serve-env CONFIG` on a free port; its URL. Stopped with SIGTERM, which it must
    take as a clean stop (exit 0, no traceback in its log)."""
    log = tmp_path_factory.mktemp("serve_env") / "serve_env.log"
    port = free_port()
    with log.open("w") as sink:
        process = subprocess.Popen(
            lexrl_command(
                "serve-env", CONFIG, "--port", str(port), "--max-sessions", str(MAX_SESSIONS)
            ),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        started = time.perf_counter()
        while "ready:" not in log.read_text(errors="replace"):
            if process.poll() is not None or time.perf_counter() - started > 180:
                pytest.fail(f"lexrl serve-env not ready:\n{log.read_text(errors='replace')}")
            time.sleep(0.5)
        url = f"http://127.0.0.1:{port}"
        assert f"ready: {url}" in log.read_text()
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
    text = log.read_text(errors="replace")
    assert code == 0, f"lexrl serve-env ended with {code} on SIGTERM:\n{text[-4000:]}"
    assert "Traceback" not in text, text[-4000:]


def engine_trajectory(env, task: Task, teacher: Callable) -> Trajectory:
    """The episode of `task` as lexrl's rollout engine plays it with `teacher`'s replies."""
    (trajectory,) = run_groups(
        env, [task], 1, lambda t: ScriptedPolicy(None, t.id, teacher), progress=False
    )[0].trajectories
    return trajectory


def same(a: dict[str, float], b: dict[str, float]) -> bool:
    """Equal numbers, NaN equal to NaN (JSON carries a NaN as null)."""
    return a.keys() == b.keys() and all(
        a[k] == b[k] or (a[k] is None or math.isnan(a[k])) and math.isnan(b[k]) for k in a
    )


def assert_scores_as_engine(final: AgentObservation, engine: Trajectory) -> None:
    expected = EpisodeResult.of(engine)
    assert final.done and final.task_id == engine.task_id
    assert final.failed == engine.failed
    assert final.reward == expected.reward
    assert final.components == engine.components
    assert final.role_rewards == expected.role_rewards
    assert same(final.metrics, engine.metrics)
    assert [(t["role"], t["text"], t["trainable"]) for t in final.turns] == [
        (t.role, t.text, t.trainable) for t in engine.turns
    ]


def teacher_reply(mixture, task: Task) -> Callable[[AgentObservation], str]:
    teacher = mixture.teacher(task, random.Random(7))
    return lambda observation: teacher(observation.role, observation.messages[1:])


@pytest.mark.parametrize("member", MEMBERS)
def test_teacher_episodes_over_openenv_score_as_the_engine(served_env, mixture, member):
    tasks = mixture.member_tasks("test")[member][:3]

    async def episodes():
        async with LexrlEnvClient(base_url=served_env) as client:
            # One session plays its episodes one after the other.
            return [
                await play(client, teacher_reply(mixture, task), task_id=task.id) for task in tasks
            ]

    for task, (final, asked) in zip(tasks, asyncio.run(episodes()), strict=True):
        assert asked, "an episode with no agent turn"
        first = asked[0]
        assert first.env == member and first.task_id == task.id and not first.done
        assert first.messages[0]["role"] == "system" and first.reward is None
        assert first.temperature is not None and first.max_new_tokens == 128
        assert final.env == member and final.reward is not None
        assert_scores_as_engine(final, engine_trajectory(mixture, task, _teacher(mixture, task)))


def _teacher(mixture, task):
    return mixture.teacher(task, random.Random(7))


def test_interleaved_and_concurrent_sessions_score_as_the_engine(served_env, mixture):
    """Four sessions, one task of each env, stepped in turn (A, B, C, D, A, ...); then four
    episodes at once. Every session keeps its own episode."""
    by_member = mixture.member_tasks("test")
    tasks = [by_member[member][3] for member in MEMBERS]
    concurrent = [by_member[member][4] for member in MEMBERS]

    async def interleaved():
        clients = [LexrlEnvClient(base_url=served_env) for _ in tasks]
        replies = [teacher_reply(mixture, task) for task in tasks]
        try:
            results = [
                await client.reset(task_id=task.id)
                for client, task in zip(clients, tasks, strict=True)
            ]
            rounds = 0
            while not all(result.done for result in results):
                rounds += 1
                for i, client in enumerate(clients):
                    if not results[i].done:
                        results[i] = await client.step(
                            AgentReply(reply=replies[i](results[i].observation))
                        )
            states = [await client.state() for client in clients]
        finally:
            for client in clients:
                await client.close()
        return [result.observation for result in results], states, rounds

    async def at_once():
        async def one(task):
            async with LexrlEnvClient(base_url=served_env) as client:
                return await play(client, teacher_reply(mixture, task), task_id=task.id)

        return await asyncio.gather(*(one(task) for task in concurrent))

    finals, states, rounds = asyncio.run(interleaved())
    assert rounds > 1
    assert len({state.episode_id for state in states}) == len(tasks)
    for task, final, state in zip(tasks, finals, states, strict=True):
        assert state.task_id == task.id and state.done and state.step_count >= 1
        assert_scores_as_engine(final, engine_trajectory(mixture, task, _teacher(mixture, task)))
    for task, (final, _) in zip(concurrent, asyncio.run(at_once()), strict=True):
        assert_scores_as_engine(final, engine_trajectory(mixture, task, _teacher(mixture, task)))


def test_the_rewards_follow_the_replies(served_env, mixture):
    """Replies other than the teacher's score as the engine scores them, and lower: the
    comparisons above are not of a reward that ignores the replies."""

    def wrong(role: str, messages) -> str:
        return "I do not know."

    async def episode(task: Task):
        async with LexrlEnvClient(base_url=served_env) as client:
            return await play(client, lambda o: wrong(o.role, o.messages[1:]), task_id=task.id)

    for member in ("gdpr", "lexam", "argument"):
        task = mixture.member_tasks("test")[member][0]
        final, _ = asyncio.run(episode(task))
        engine = engine_trajectory(mixture, task, wrong)
        assert_scores_as_engine(final, engine)
        taught = engine_trajectory(mixture, task, _teacher(mixture, task))
        assert final.reward < taught.reward, member


def test_reset_deals_tasks_and_misuse_is_refused(served_env, mixture):
    """openenv's untyped GenericEnvClient: reset by index, by seed, the next task; clear errors
    for a step before reset, an unknown task or argument, a step after the end."""
    tasks = mixture.tasks("test")

    async def session():
        async with GenericEnvClient(base_url=served_env) as client:
            with pytest.raises(RuntimeError, match="call reset first"):
                await client.step({"reply": "too early"})
            with pytest.raises(RuntimeError, match="no task 'nope'"):
                await client.reset(task_id="nope")
            with pytest.raises(RuntimeError, match="unknown reset arguments"):
                await client.reset(task="x")
            with pytest.raises(RuntimeError, match="task_index 9999"):
                await client.reset(task_index=9999)
            by_index = await client.reset(task_index=len(tasks) - 1)
            assert by_index.observation["task_id"] == tasks[-1].id
            seeded = [(await client.reset(seed=3)).observation["task_id"] for _ in range(2)]
            assert seeded[0] == seeded[1]
            dealt = [(await client.reset()).observation["task_id"] for _ in range(2)]
            assert all(task_id in {t.id for t in tasks} for task_id in dealt)
            assert dealt[0] != dealt[1]
            # A whole episode as plain dicts; then its session refuses another reply.
            task = mixture.member_tasks("test")["gdpr"][1]
            reply = teacher_reply(mixture, task)
            result = await client.reset(task_id=task.id, episode_id="mine")
            while not result.done:
                result = await client.step({"reply": reply(AgentObservation(**result.observation))})
            state = await client.state()
            assert state["episode_id"] == "mine" and state["done"]
            with pytest.raises(RuntimeError, match="is over"):
                await client.step({"reply": "too late"})
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                await client.step({"text": "not the field"})
            return task, result

    task, result = asyncio.run(session())
    engine = engine_trajectory(mixture, task, _teacher(mixture, task))
    assert result.reward == engine.reward
    assert result.observation["components"] == engine.components


def test_the_http_routes(served_env, mixture):
    """openenv's stateless HTTP routes: `/reset` shows the first agent of a fresh episode (then
    drops it); `/step` has no episode to step and says so (a 400, not a server error)."""
    import httpx

    task = mixture.member_tasks("test")["lexam"][2]
    with httpx.Client(base_url=served_env, timeout=60) as http:
        assert http.get("/health").json()["status"] == "healthy"
        assert http.get("/metadata").json()["name"] == "lexrl-mix"
        schema = http.get("/schema").json()
        assert "reply" in schema["action"]["properties"]
        assert {"role", "messages", "role_rewards"} <= set(schema["observation"]["properties"])
        first = http.post("/reset", json={"task_id": task.id}).json()
        assert first["done"] is False and first["reward"] is None
        observation = first["observation"]
        assert observation["task_id"] == task.id and observation["env"] == "lexam"
        assert observation["role"] and observation["messages"][0]["role"] == "system"
        step = http.post("/step", json={"action": {"reply": "an answer"}})
        assert step.status_code == 400 and "call reset first" in step.json()["detail"]
        unknown = http.post("/reset", json={"task_id": "nope"})
        assert unknown.status_code == 400 and "no task 'nope'" in unknown.json()["detail"]


def test_sessions_beyond_max_sessions_are_refused(served_env):
    """`--max-sessions` sessions at once; the next connection is refused. (openenv's server
    sends CAPACITY_REACHED and hangs up at once: its client reports that error, or the closed
    connection if the hang-up comes before its first message goes out.)"""

    async def start(client: LexrlEnvClient) -> None:
        await client.reset(task_index=0)

    async def sessions():
        clients = []
        try:
            for _ in range(MAX_SESSIONS):
                # Sessions of earlier tests may take a moment to be released.
                for attempt in range(20):
                    client = LexrlEnvClient(base_url=served_env)
                    clients.append(client)
                    try:
                        await start(client)
                        break
                    except (RuntimeError, ConnectionClosed):
                        await client.close()
                        clients.remove(client)
                        if attempt == 19:
                            raise
                        await asyncio.sleep(0.25)
            refused = LexrlEnvClient(base_url=served_env)
            clients.append(refused)
            with pytest.raises((RuntimeError, ConnectionClosed)) as error:
                await start(refused)
            if error.type is RuntimeError:
                assert "CAPACITY_REACHED" in str(error.value)
            # Each admitted session still plays.
            for client in clients[:MAX_SESSIONS]:
                assert not (await client.step(AgentReply(reply="statute 1"))).observation.failed
        finally:
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()

    asyncio.run(sessions())


def test_serve_env_refuses_a_taken_port_and_an_unknown_split(lexrl_in_process, served_env):
    port = served_env.rsplit(":", 1)[1]
    taken = lexrl_in_process("serve-env", CONFIG, "--port", port)
    assert taken.returncode == 2, taken.stderr
    assert taken.stderr.strip().splitlines() == [
        f"config error: --host 127.0.0.1 --port {port}: cannot listen there (Address already in use)"
    ]
    split = lexrl_in_process("serve-env", CONFIG, "--port", str(free_port()), "--split", "bogus")
    assert split.returncode == 2, split.stderr
    (line,) = split.stderr.strip().splitlines()
    assert line.startswith("config error: --split bogus:") and "has no split 'bogus'" in line


def replayed(queue: list[tuple[str, str]]) -> Callable[[str, object], str]:
    """A teacher that replies `queue`'s (role, text) in order, checking each role."""

    def reply(role: str, messages: object) -> str:
        expected_role, text = queue.pop(0)
        assert role == expected_role
        return text

    return reply


@pytest.mark.slow
def test_vllm_replies_over_openenv_score_as_the_engine(smollm2_server, served_env, mixture):
    """openenv's client plays whole episodes with a served SmolLM2's replies (the OpenAI API of
    `lexrl serve`); the same replies replayed through lexrl's engine score the same."""
    from openai import AsyncOpenAI

    llm = AsyncOpenAI(base_url=smollm2_server.base_url, api_key="unused", max_retries=0)
    by_member = mixture.member_tasks("test")
    tasks = [by_member[member][0] for member in MEMBERS]

    async def episode(task: Task):
        replies: list[tuple[str, str]] = []

        async def reply(observation: AgentObservation) -> str:
            completion = await llm.chat.completions.create(
                model=smollm2_server.model,
                messages=observation.messages,
                max_tokens=min(observation.max_new_tokens or 32, 32),
                temperature=observation.temperature,
                seed=len(replies),
            )
            text = completion.choices[0].message.content or ""
            replies.append((observation.role, text))
            return text

        async with LexrlEnvClient(base_url=served_env, message_timeout_s=300) as client:
            final, _ = await play(client, reply, task_id=task.id)
        return final, replies

    async def all_episodes():
        return await asyncio.gather(*(episode(task) for task in tasks))

    for task, (final, replies) in zip(tasks, asyncio.run(all_episodes()), strict=True):
        assert replies and any(text.strip() for _, text in replies)
        queue = list(replies)
        engine = engine_trajectory(mixture, task, replayed(queue))
        assert not queue
        assert_scores_as_engine(final, engine)
        print(f"{final.env}: {len(replies)} replies, reward {final.reward}, {final.role_rewards}")
