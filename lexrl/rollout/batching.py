"""The micro-batching that in-process backends (`hf_backend`, `vllm_engine`) share.

An in-process backend gathers the requests that concurrent episodes make into one left-padded
batch per sampling setting, so K x G episodes cost a handful of `generate` calls rather than one
each. This module imports neither torch nor transformers.

Which requests share a batch, and in which rows, decides the random draws each one gets (the
sampler draws for the whole padded batch) and the padding, so a run repeats only if its batches
do. With `deterministic` a batch is cut once every running episode (`RunningEpisodes`, kept by
the engine) waits for a model, and its rows are ordered by episode and call, neither of which
depends on how long anything took.
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from dataclasses import dataclass

from lexrl.generation import Completion, Sampling, _current_episode, _Episode


@dataclass
class _Request:
    prompt_ids: list[int]
    sampling: Sampling
    future: asyncio.Future
    episode: _Episode | None = None
    order: tuple[float, int] = (math.inf, 0)
    """(episode key, call number); requests from outside an episode go last, as they came."""

    def resolve(self, result: Completion | None, error: Exception | None = None) -> None:
        if self.episode is not None:
            self.episode.answered()
        if self.future.done():
            return
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(result)


class MicroBatchedBackend:
    """Gathers the requests of concurrent episodes into batches for `generate_batch`, one batch
    per sampling setting, at most `max_batch_size` prompts each.

    A batch is cut once every episode running under the engine waits for a model
    (`deterministic`), or `batch_wait_ms` after its first request; requests made outside the
    engine's episodes always get the wait.
    """

    def __init__(
        self, max_batch_size: int = 64, batch_wait_ms: float = 2.0, deterministic: bool = True
    ):
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000
        self.deterministic = deterministic
        self.adapter_version = 0
        self.batches_run = 0
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task | None = None

    def generate_batch(self, prompts: list[list[int]], sampling: Sampling) -> list[Completion]:
        raise NotImplementedError

    def release_memory(self) -> None:
        """Before the optimizer update: give accelerator memory back (GPU engines sleep)."""

    def resume(self) -> None:
        """After the update: take the memory back."""

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._worker is None or self._worker.get_loop() is not loop:
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._serve())
        future = loop.create_future()
        request = _Request(list(prompt_ids), sampling, future, _current_episode.get())
        if request.episode is not None:
            request.order = request.episode.call()
        await self._queue.put(request)
        return await future

    async def _serve(self) -> None:
        assert self._queue is not None
        while True:
            requests = [await self._queue.get()]
            first = requests[0].episode
            episodes = first.episodes if first is not None else None
            if self.deterministic and episodes is not None:
                # Woken, an episode may have started since (one freed a concurrency slot).
                while not episodes.all_waiting.is_set():
                    await episodes.all_waiting.wait()
            else:
                # Let every episode that is ready to call the model enqueue before the cut.
                await asyncio.sleep(self.batch_wait_s)
            while not self._queue.empty():
                requests.append(self._queue.get_nowait())
            if self.deterministic:
                # Arrival order can depend on timing (an episode that awaited a slow tool).
                requests.sort(key=lambda request: request.order)
            by_sampling: dict[Sampling, list[_Request]] = defaultdict(list)
            for request in requests:
                by_sampling[request.sampling].append(request)
            for sampling, same in by_sampling.items():
                for start in range(0, len(same), self.max_batch_size):
                    chunk = same[start : start + self.max_batch_size]
                    self.batches_run += 1
                    try:
                        results = self.generate_batch([r.prompt_ids for r in chunk], sampling)
                    except Exception as error:  # noqa: BLE001 - the caller gets the error
                        for request in chunk:
                            request.resolve(None, error)
                        continue
                    for request, result in zip(chunk, results, strict=True):
                        request.resolve(result)
