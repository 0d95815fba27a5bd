"""One lexrl episode played turn by turn from outside: the inversion of control that other
trainers' environment APIs need (verifiers' multi-turn rollouts, OpenEnv's `reset` / `step`).

An env plays an episode as a coroutine that calls `Policy.chat` for each agent's reply. Here the
policy is an `ExternalPolicy`: each `chat` becomes an `AgentRequest` (the role, its messages,
its sampling, whether the turn is trainable) and waits until the caller supplies the reply. The
env's own workflow, judges, parsers and rewards run unchanged, so the reward of an episode
played this way equals `lexrl eval`'s for the same replies.

    session = EpisodeSession(env, task)
    request = await session.start()
    while isinstance(request, AgentRequest):
        request = await session.reply(my_model(request.messages))
    request.reward, request.components, request.role_rewards   # an EpisodeResult

Use a session from one event loop. The env's external judges are not agents here: the env calls
them itself, and their replies appear as non-trainable turns of the trajectory.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from transformers import PreTrainedTokenizerBase

from lexrl.envs.base import Env
from lexrl.generation import Completion, Sampling
from lexrl.policy import Messages, Policy, conversation
from lexrl.types import Task, Trajectory


@dataclass
class AgentRequest:
    """The agent the episode waits on, and what it sees."""

    role: str
    messages: list[dict[str, str]]
    """The whole chat of this call, system prompt first."""
    temperature: float
    """The sampling temperature the env asks for this role (the papers' settings)."""
    max_new_tokens: int
    trainable: bool = True
    """False for a turn the env marks as not trained (a fixed model's role)."""


@dataclass
class EpisodeResult:
    """The finished episode: the env's reward, its components and each role's own reward."""

    reward: float | None
    """None when the episode failed (`failed` says why): it has no reward, never a 0."""
    components: dict[str, float]
    role_rewards: dict[str, float]
    """Each role's own reward; a role that acted but is not listed earns `reward`."""
    metrics: dict[str, float]
    failed: str | None
    trajectory: Trajectory = field(repr=False)

    @classmethod
    def of(cls, trajectory: Trajectory) -> EpisodeResult:
        roles = {turn.role for turn in trajectory.turns if turn.trainable}
        reward = None if trajectory.failed else trajectory.reward
        role_rewards = {
            role: trajectory.role_rewards.get(role, trajectory.reward) for role in roles
        }
        return cls(
            reward=reward,
            components=dict(trajectory.components),
            role_rewards={} if trajectory.failed else role_rewards,
            metrics=dict(trajectory.metrics),
            failed=trajectory.failed,
            trajectory=trajectory,
        )


class EpisodeError(RuntimeError):
    """A session used out of order (a reply with no request waiting, a finished episode)."""


class ExternalPolicy(Policy):
    """A Policy whose replies are supplied from outside, one `AgentRequest` at a time."""

    def __init__(
        self, task_id: str, tokenizer: PreTrainedTokenizerBase | None, max_new_tokens: int
    ):
        super().__init__(None, tokenizer, task_id, max_new_tokens)  # type: ignore[arg-type]
        self.requests: asyncio.Queue[tuple[AgentRequest, asyncio.Future[str]]] = asyncio.Queue()
        self._trainable = True
        self._role = ""

    async def chat(
        self,
        role: str,
        system: str,
        messages: Messages,
        temperature: float = 1.0,
        trainable: bool = True,
        max_new_tokens: int | None = None,
    ) -> str:
        self._trainable = trainable
        return await super().chat(role, system, messages, temperature, trainable, max_new_tokens)

    async def _complete(
        self, role: str, system: str, messages: Messages, prompt_ids: list[int], sampling: Sampling
    ) -> Completion:
        request = AgentRequest(
            role,
            conversation(system, messages),
            sampling.temperature,
            sampling.max_new_tokens,
            self._trainable,
        )
        reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        await self.requests.put((request, reply))
        text = await reply
        ids = self._encode(text)
        return Completion(ids, [0.0] * len(ids), adapter_version=-1, text=text)


class EpisodeSession:
    """One episode of `env` on `task`, advanced by `start` and then `reply` until it returns an
    `EpisodeResult`."""

    def __init__(
        self,
        env: Env,
        task: Task,
        tokenizer: PreTrainedTokenizerBase | None = None,
        max_new_tokens: int = 96,
    ):
        self.env = env
        self.task = task
        self.policy = ExternalPolicy(task.id, tokenizer, max_new_tokens)
        self._episode: asyncio.Task[Trajectory] | None = None
        self._waiting: asyncio.Future[str] | None = None
        self.result: EpisodeResult | None = None

    async def start(self) -> AgentRequest | EpisodeResult:
        """Start the episode; the first agent's request (or the result of an episode that needs
        no agent)."""
        if self._episode is not None:
            raise EpisodeError(f"episode of task {self.task.id!r} already started")
        self._episode = asyncio.ensure_future(self.env.run_episode(self.task, self.policy))
        return await self._next()

    async def reply(self, text: str) -> AgentRequest | EpisodeResult:
        """The waiting agent's reply; the next agent's request, or the episode's result."""
        if self.result is not None:
            raise EpisodeError(f"episode of task {self.task.id!r} is over")
        if self._waiting is None:
            raise EpisodeError(f"episode of task {self.task.id!r}: no agent is waiting for a reply")
        waiting, self._waiting = self._waiting, None
        waiting.set_result(text)
        return await self._next()

    async def _next(self) -> AgentRequest | EpisodeResult:
        assert self._episode is not None
        asked = asyncio.ensure_future(self.policy.requests.get())
        await asyncio.wait({asked, self._episode}, return_when=asyncio.FIRST_COMPLETED)
        if asked.done():
            request, self._waiting = asked.result()
            return request
        asked.cancel()
        self.result = EpisodeResult.of(self._episode.result())
        return self.result

    def close(self) -> None:
        """Abandon an unfinished episode."""
        if self._episode is not None and not self._episode.done():
            self._episode.cancel()
