"""The generation contract every backend and every policy speaks, and the bookkeeping of running
episodes.

A backend (`Backend`) takes prompt token ids and sampling settings (`Sampling`) and returns a
`Completion`: completion ids with the sampler's per-token log-probs, tagged with the adapter
version that produced them. `RunningEpisodes` counts the episodes a rollout runs and how many
wait for a model call, which is what a deterministic batcher (`lexrl.rollout.batching`) waits
for; `count_turn` and `current_call` let a policy report to it without an argument. This module
imports neither torch nor transformers, nor any other part of lexrl.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0
    """0 means greedy decoding."""
    max_new_tokens: int = 96


@dataclass
class Completion:
    completion_ids: list[int]
    logprobs: list[float]
    """log p(token) under the distribution the token was drawn from (logits / temperature)."""
    adapter_version: int
    text: str | None = None
    """The reply's text when the backend has it (a chat endpoint; a scripted reply); None: the
    policy decodes `completion_ids`."""
    prompt_ids: list[int] | None = None
    """The prompt's token ids as the server tokenized it (a chat endpoint that returns them);
    None: the policy's own rendering."""


class Backend(Protocol):
    adapter_version: int
    """The adapter version every new completion is sampled from (recorded in each Turn)."""
    needs_adapter_files: bool
    """True when the trainer must save the adapter and `load_adapter` it after each step
    (a separate inference engine); False when the backend samples from the live weights."""
    shared_by_processes: bool
    """True when all training processes sample from the same engine (a server): only the main
    process loads an adapter, the others `use_adapter` it."""

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Completion: ...

    def load_adapter(self, adapter_dir: Path, version: int) -> None:
        """Make the adapter saved in `adapter_dir` the one sampled from, as `version`."""
        ...

    def use_adapter(self, version: int, adapter_dir: Path | None = None) -> None:
        """Sample from `version`, already loaded (by another process of the same run); a backend
        that may have to load it again (a restarted vLLM server) finds it in `adapter_dir`."""
        ...

    def release_memory(self) -> None:
        """Called before each optimizer update (a colocated GPU engine sleeps)."""
        ...

    def resume(self) -> None:
        """Called after each optimizer update."""
        ...


class RunningEpisodes:
    """The episodes a rollout is running and how many of them wait for a model call: the
    deterministic batcher's cue that no request can come before some are answered."""

    def __init__(self, on_turn: Callable[[int], None] | None = None) -> None:
        self.running = 0
        self.waiting = 0
        self.all_waiting = asyncio.Event()
        """Set while every running episode has a model call unanswered."""
        self.turns = 0
        """Turns the episodes have played so far, ended episodes included."""
        self.on_turn = on_turn
        """Called with `turns` after each turn: progress that shows before any episode ends,
        which in a long multi-agent workflow (a debate) is most of the rollout."""

    @contextmanager
    def track(self, key: int) -> Iterator[None]:
        """Count the current task, and the tasks it starts, as one running episode; `key` orders
        its requests within a batch (the engine's episode index)."""
        episode = _Episode(self, key)
        token = _current_episode.set(episode)
        self._count(running=1)
        try:
            yield
        finally:
            _current_episode.reset(token)
            waiting = episode.calls > 0
            episode.episodes = None
            self._count(running=-1, waiting=-1 if waiting else 0)

    def count_turn(self) -> None:
        self.turns += 1
        if self.on_turn is not None:
            self.on_turn(self.turns)

    def _count(self, running: int = 0, waiting: int = 0) -> None:
        self.running += running
        self.waiting += waiting
        # >= rather than ==: a miscount must never stall the batcher.
        if self.waiting >= self.running:
            self.all_waiting.set()
        else:
            self.all_waiting.clear()


@dataclass
class _Episode:
    episodes: RunningEpisodes | None
    """None once the episode has ended (a call it left behind no longer counts)."""
    key: int
    calls: int = 0
    """Model calls sent and not yet answered (an episode may make several at once)."""
    calls_made: int = 0
    named_calls: int = 0

    def call(self) -> tuple[int, int]:
        """Count a new call; returns its place in a batch."""
        self.calls += 1
        self.calls_made += 1
        if self.calls == 1 and self.episodes is not None:
            self.episodes._count(waiting=1)
        return self.key, self.calls_made

    def answered(self) -> None:
        self.calls -= 1
        if self.calls == 0 and self.episodes is not None:
            self.episodes._count(waiting=-1)


# A context variable rather than an argument: envs call the backend through `Policy`, and each
# episode's task (and any task it starts) sees its own value.
_current_episode: ContextVar[_Episode | None] = ContextVar("lexrl_episode", default=None)


def count_turn() -> None:
    """Count a turn the running episode has played towards its rollout's progress (nothing
    outside the engine)."""
    episode = _current_episode.get()
    if episode is not None and episode.episodes is not None:
        episode.episodes.count_turn()


def current_call() -> str:
    """`<episode>:<n>` for the n-th call of this name within the running episode (the engine's
    episode index), empty outside the engine: tells apart the K samples of one prompt."""
    episode = _current_episode.get()
    if episode is None:
        return ""
    episode.named_calls += 1
    return f"{episode.key}:{episode.named_calls}"
