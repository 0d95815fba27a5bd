"""`lexrl serve-env CONFIG`: a lexrl env as an OpenEnv environment server.

Built from openenv-core's own server classes (`openenv.core.env_server`):

* `Environment` (subclassed by `LexrlEnvironment`): `reset` starts an episode and returns the
  first agent's observation, `step` takes that agent's reply and returns the next agent's, the
  last `step` returns `done`, the reward, its components and each role's reward; `state`.
* `Action`, `Observation`, `State` (subclassed by `AgentReply`, `AgentObservation`,
  `EpisodeState`): the wire types.
* `create_fastapi_app` / `HTTPEnvServer` with `ConcurrencyConfig(max_concurrent_envs=...)`: the
  FastAPI app. Its `/ws` WebSocket endpoint (what openenv's `EnvClient` speaks) gives every
  connection a session with its own `LexrlEnvironment` (the factory is called per session), up
  to `--max-sessions` at once; the server runs a session's `reset` / `step` in that session's
  own worker thread. Its stateless HTTP `/reset` and `/step` make a fresh environment per
  request, so a multi-turn episode needs a session: `openenv.core.GenericEnvClient` or
  `lexrl.integrations.openenv_client.LexrlEnvClient`.

The episode itself is `lexrl.integrations.episode.EpisodeSession`: the env's own workflow,
judges, parsers and rewards, unchanged, so an episode's reward equals `lexrl eval`'s for the
same replies. Episodes are asyncio coroutines; all sessions' episodes run on one event loop
(`EpisodeLoop`, a background thread), as lexrl's rollout engine runs a batch's episodes on one
loop over one env, and a session's worker thread waits on its episode there. The server's own
loop stays free for the other connections.

What the wire does not carry: token ids and log-probs (the client samples; it has them), and
the env's per-step details (`Trajectory.steps`, `outcome`). The final observation carries the
episode's turns as text (role, text, trainable), the env's judge calls included.
"""

from __future__ import annotations

import asyncio
import functools
import random
import socket
import threading
import uuid
from collections.abc import Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from pydantic import Field

from lexrl.config import Config
from lexrl.errors import ConfigError

try:
    from fastapi import FastAPI
    from openenv.core.env_server import (
        Action,
        ConcurrencyConfig,
        Environment,
        Observation,
        State,
        create_fastapi_app,
    )
    from openenv.core.env_server.types import EnvironmentMetadata
except ModuleNotFoundError as missing:  # the optional extra `openenv`
    raise ConfigError(
        f"lexrl serve-env needs openenv-core ({missing.name} is not installed): "
        "pip install -e '.[openenv]'"
    ) from missing
from lexrl.envs.base import Env
from lexrl.envs.composite import composite
from lexrl.integrations.episode import AgentRequest, EpisodeResult, EpisodeSession
from lexrl.types import Task

T = TypeVar("T")


class EnvRequestError(ValueError):
    """A request the session cannot take (an unknown task, a step before `reset` or after the
    end): openenv's WebSocket session answers it as an error message, the HTTP routes as a 400."""


class AgentReply(Action):
    """The waiting agent's reply: the text its model generated."""

    reply: str = Field(description="The agent's reply to the messages of the last observation")


class AgentObservation(Observation):
    """The agent the episode waits on and its chat (`done` false), or the finished episode's
    reward (`done` true; `reward` is None when the episode failed, `failed` says why)."""

    env: str = Field(description="The env that made the task (a mixture's member)")
    task_id: str
    role: str | None = Field(default=None, description="The agent that replies next")
    messages: list[dict[str, str]] = Field(
        default_factory=list, description="Its whole chat, system prompt first"
    )
    temperature: float | None = Field(
        default=None, description="The sampling temperature the env asks for this role"
    )
    max_new_tokens: int | None = None
    trainable: bool = Field(
        default=True, description="False for a turn the env does not train (a fixed role)"
    )
    components: dict[str, float] = Field(default_factory=dict)
    role_rewards: dict[str, float] = Field(
        default_factory=dict, description="Each trainable role's own reward"
    )
    metrics: dict[str, float] = Field(default_factory=dict)
    failed: str | None = None
    turns: list[dict[str, Any]] = Field(
        default_factory=list,
        description="At the end: every turn of the episode (role, text, trainable)",
    )


class EpisodeState(State):
    """The session's episode: `episode_id`, `step_count` (replies taken), and lexrl's own."""

    env: str | None = None
    task_id: str | None = None
    role: str | None = None
    done: bool = False


class EpisodeLoop:
    """One asyncio event loop in a daemon thread; every session's episode runs on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="lexrl-openenv-episodes", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `coroutine` on the loop; block the calling thread until it ends."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            future.cancel()
            raise TimeoutError(f"no reply from the env within {timeout_s} s") from None

    def call_soon(self, callback: Any) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(callback)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


class EnvRuntime:
    """What every session shares: the lexrl env (built once), the split's tasks, the cursor of
    the next task `reset` deals, and the episode loop."""

    def __init__(self, env: Env, split: str, max_new_tokens: int = 96):
        self.env = env
        self.split = split
        try:
            self.tasks: list[Task] = env.tasks(split)
        except KeyError as error:
            raise ConfigError(
                f"--split {split}: {error.args[0] if error.args else error}"
            ) from None
        if not self.tasks:
            raise ConfigError(f"--split {split}: env {env.name!r} has no tasks in it")
        self.by_id = {task.id: task for task in self.tasks}
        self.max_new_tokens = max_new_tokens
        self.loop = EpisodeLoop()
        self._cursor = 0
        self._lock = threading.Lock()

    def task(
        self, task_id: str | None = None, task_index: int | None = None, seed: int | None = None
    ) -> Task:
        """By id, by index in the split, drawn with `seed`, or else the split's next task in
        order (cycling)."""
        if task_id is not None and task_index is not None:
            raise EnvRequestError("give task_id or task_index, not both")
        if task_id is not None:
            if task_id not in self.by_id:
                raise EnvRequestError(
                    f"no task {task_id!r} in split {self.split!r} of {self.env.name!r}"
                )
            return self.by_id[task_id]
        if task_index is not None:
            if not 0 <= task_index < len(self.tasks):
                raise EnvRequestError(
                    f"task_index {task_index}: split {self.split!r} has {len(self.tasks)} tasks"
                )
            return self.tasks[task_index]
        if seed is not None:
            return self.tasks[random.Random(seed).randrange(len(self.tasks))]
        with self._lock:
            position, self._cursor = self._cursor, self._cursor + 1
        return self.tasks[position % len(self.tasks)]

    def close(self) -> None:
        self.loop.stop()


class LexrlEnvironment(Environment[AgentReply, AgentObservation, EpisodeState]):
    """One OpenEnv session: one lexrl episode at a time on the shared env."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, runtime: EnvRuntime):
        super().__init__()
        self.runtime = runtime
        self._session: EpisodeSession | None = None
        self._state = EpisodeState()
        self._member = runtime.env.name

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        task_index: int | None = None,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> AgentObservation:
        """Start an episode on `task_id`, the split's `task_index`-th task, one drawn with
        `seed`, or else the split's next task; the first agent's observation."""
        if kwargs:
            raise EnvRequestError(
                f"unknown reset arguments {sorted(kwargs)}; "
                "reset takes task_id, task_index, seed, episode_id"
            )
        task = self.runtime.task(task_id, task_index, seed)
        self.close()
        self._member = composite(self.runtime.env).member_name(task)
        session = EpisodeSession(self.runtime.env, task, max_new_tokens=self.runtime.max_new_tokens)
        self._session = session
        self._state = EpisodeState(
            episode_id=episode_id or str(uuid.uuid4()), env=self._member, task_id=task.id
        )
        return self._observe(self.runtime.loop.run(session.start(), timeout_s))

    def step(
        self, action: AgentReply, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentObservation:
        """The waiting agent's reply; the next agent's observation, or the episode's end."""
        if self._session is None:
            raise EnvRequestError(
                "no episode: call reset first, in the same session (openenv's WebSocket /ws; "
                "the HTTP /reset and /step of openenv are stateless)"
            )
        if self._state.done:
            raise EnvRequestError(f"the episode of task {self._state.task_id!r} is over: reset")
        observation = self._observe(
            self.runtime.loop.run(self._session.reply(action.reply), timeout_s)
        )
        self._state.step_count += 1
        return observation

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        """Abandon an unfinished episode (on the loop it runs on)."""
        if self._session is not None:
            self.runtime.loop.call_soon(self._session.close)
            self._session = None

    def get_metadata(self) -> EnvironmentMetadata:
        env = self.runtime.env
        members = ", ".join(composite(env).members)
        return EnvironmentMetadata(
            name=f"lexrl-{env.name}",
            description=(
                f"lexrl env {env.name!r} ({members}), split {self.runtime.split!r} "
                f"({len(self.runtime.tasks)} tasks): each step is one agent's reply"
            ),
            version=_lexrl_version(),
        )

    def _observe(self, step: AgentRequest | EpisodeResult) -> AgentObservation:
        assert self._state.task_id is not None
        if isinstance(step, AgentRequest):
            self._state.role = step.role
            return AgentObservation(
                env=self._member,
                task_id=self._state.task_id,
                role=step.role,
                messages=step.messages,
                temperature=step.temperature,
                max_new_tokens=step.max_new_tokens,
                trainable=step.trainable,
            )
        self._state.role = None
        self._state.done = True
        return AgentObservation(
            done=True,
            reward=step.reward,
            env=self._member,
            task_id=self._state.task_id,
            components=step.components,
            role_rewards=step.role_rewards,
            metrics=step.metrics,
            failed=step.failed,
            turns=[
                {"role": turn.role, "text": turn.text, "trainable": turn.trainable}
                for turn in step.trajectory.turns
            ],
        )


def _lexrl_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lexrl")
    except PackageNotFoundError:
        return "0"


class QuietDisconnects:
    """ASGI middleware: a WebSocket client that hangs up first is not an error. (openenv's
    `/ws` handler closes the socket after the client's `close` message, and lets the
    `WebSocketDisconnect` of a client already gone escape, which uvicorn logs as a traceback.)"""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def build_app(runtime: EnvRuntime, max_sessions: int = 16) -> FastAPI:
    """The FastAPI app of openenv's `HTTPEnvServer` serving `runtime`'s env."""
    if max_sessions < 1:
        raise ConfigError(f"--max-sessions {max_sessions}: give at least 1")
    app = create_fastapi_app(
        functools.partial(LexrlEnvironment, runtime),
        AgentReply,
        AgentObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=max_sessions),
    )
    app.add_middleware(QuietDisconnects)

    async def refused(request: Any, error: Exception):
        from fastapi.responses import JSONResponse

        return JSONResponse({"detail": str(error)}, status_code=400)

    app.add_exception_handler(EnvRequestError, refused)
    return app


def make_runtime(config: Config, split: str = "test") -> EnvRuntime:
    from lexrl.envs import make_env

    return EnvRuntime(make_env(config.env), split, config.rollout.max_new_tokens)


def serve_env(
    config: Config, host: str, port: int, split: str = "test", max_sessions: int = 16
) -> None:
    """Serve the config's env until SIGINT or SIGTERM (then return); prints `ready: URL` once
    it listens. Call it from the main thread (uvicorn's signal handlers live there)."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise ConfigError(
            f"--host {host} --port {port}: cannot listen there ({error.strerror})"
        ) from None
    url = f"http://{host}:{listener.getsockname()[1]}"
    try:
        runtime = make_runtime(config, split)
    except BaseException:
        listener.close()
        raise
    env = runtime.env

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                print(
                    f"ready: {url} serves env {env.name!r} (split {split!r}, "
                    f"{len(runtime.tasks)} tasks, up to {max_sessions} sessions); "
                    f"connect an OpenEnv client to {url} (WebSocket {url}/ws)",
                    flush=True,
                )

        def handle_exit(self, sig: int, frame: Any) -> None:
            # Stop gracefully and return, as `lexrl serve` does, instead of uvicorn's re-raise
            # of the signal once stopped.
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

    try:
        app = build_app(runtime, max_sessions)
        server = Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
        server.run(sockets=[listener])
    finally:
        listener.close()
        runtime.close()
