"""An OpenEnv client of `lexrl serve-env`: openenv-core's `EnvClient` (a WebSocket session per
client) typed with lexrl's wire types, and `play` for a whole episode.

    async with LexrlEnvClient(base_url="http://127.0.0.1:8001") as client:
        result = await client.reset(task_id="gdpr:...")   # or task_index=, seed=, or nothing
        while not result.done:
            obs = result.observation                          # obs.role, obs.messages, ...
            result = await client.step(AgentReply(reply=my_model(obs.messages)))
        result.reward, result.observation.components, result.observation.role_rewards

`LexrlEnvClient(...).sync()` is openenv's synchronous wrapper. openenv's untyped
`GenericEnvClient` works as well (`step({"reply": text})`, observations as dicts).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from lexrl.integrations.openenv_server import AgentObservation, AgentReply, EpisodeState


class LexrlEnvClient(EnvClient[AgentReply, AgentObservation, EpisodeState]):
    """One session of a `lexrl serve-env` server: one episode at a time."""

    def _step_payload(self, action: AgentReply) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[AgentObservation]:
        observation = AgentObservation(
            **payload.get("observation", {}),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )
        return StepResult(observation, reward=observation.reward, done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> EpisodeState:
        return EpisodeState(**payload)


async def play(
    client: LexrlEnvClient,
    reply: Callable[[AgentObservation], str | Awaitable[str]],
    **reset_kwargs: Any,
) -> tuple[AgentObservation, list[AgentObservation]]:
    """Play one whole episode: `reply(observation)` answers each agent. The final observation
    (reward, components, role rewards) and the agents' observations in order."""
    asked = []
    result = await client.reset(**reset_kwargs)
    while not result.done:
        asked.append(result.observation)
        text = reply(result.observation)
        if not isinstance(text, str):
            text = await text
        result = await client.step(AgentReply(reply=text))
    return result.observation, asked
