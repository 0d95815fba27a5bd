"""An episode played turn by turn from outside (`EpisodeSession`) scores exactly as the same
replies played through lexrl's own rollout engine."""

import asyncio
import random

import pytest

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.integrations.episode import (
    AgentRequest,
    EpisodeError,
    EpisodeResult,
    EpisodeSession,
)
from lexrl.policy import ScriptedPolicy
from lexrl.rollout.engine import run_groups


@pytest.fixture(scope="module")
def mixture():
    config = load_config("configs/legal_mix_cpu.yaml", [])
    return make_env(config.env)


async def play(session: EpisodeSession, teacher) -> tuple[EpisodeResult, list[AgentRequest]]:
    requests = []
    step = await session.start()
    while isinstance(step, AgentRequest):
        requests.append(step)
        step = await session.reply(teacher(step.role, step.messages[1:]))
    return step, requests


@pytest.mark.parametrize("member", ["statute", "argument", "gdpr", "lexam"])
def test_a_session_scores_as_the_engine_on_the_same_replies(mixture, member):
    env = mixture.member_envs()[member]
    for task in env.tasks("test")[:3]:
        (engine,) = run_groups(
            env,
            [task],
            1,
            lambda t: ScriptedPolicy(None, t.id, env.teacher(t, random.Random(7))),
            progress=False,
        )[0].trajectories
        result, requests = asyncio.run(
            play(EpisodeSession(env, task), env.teacher(task, random.Random(7)))
        )
        assert requests and requests[0].messages[0]["role"] == "system"
        assert result.failed is None and engine.failed is None
        assert result.reward == engine.reward
        assert result.components == engine.components
        assert result.metrics == engine.metrics
        assert [turn.text for turn in result.trajectory.turns] == [t.text for t in engine.turns]
        assert set(result.role_rewards) == {t.role for t in engine.turns if t.trainable}


def test_a_reply_without_a_waiting_agent_and_a_finished_episode_are_refused(mixture):
    env = mixture.member_envs()["gdpr"]
    task = env.tasks("test")[0]

    async def misuse():
        session = EpisodeSession(env, task)
        with pytest.raises(EpisodeError, match="no agent is waiting"):
            await session.reply("too early")
        result, _ = await play(session, env.teacher(task, random.Random(0)))
        assert result.reward is not None
        with pytest.raises(EpisodeError, match="is over"):
            await session.reply("too late")

    asyncio.run(misuse())
