import asyncio

import pytest
import torch

from lexrl.generation import Completion, RunningEpisodes, Sampling
from lexrl.policy import Policy, render_prompt
from lexrl.rollout.batching import MicroBatchedBackend
from lexrl.rollout.engine import run_groups
from lexrl.rollout.hf_backend import HFBackend
from lexrl.train.advantages import Row
from lexrl.train.learner import completion_logprobs, pack_rows
from lexrl.types import Task, Trajectory


def _prompts(tokenizer, n):
    questions = [
        "my boss has not paid me",
        "the landlord keeps the cash",
        "someone crashed into my car",
    ]
    return [
        render_prompt(tokenizer, "You rewrite legal questions.", questions[i % 3] + " " * i)
        for i in range(n)
    ]


def test_batched_greedy_equals_one_at_a_time(tiny_model):
    model, tokenizer = tiny_model
    backend = HFBackend(model, tokenizer)
    prompts = _prompts(tokenizer, 5)
    greedy = Sampling(temperature=0.0, max_new_tokens=12)
    batched = backend.generate_batch(prompts, greedy)
    single = [backend.generate_batch([p], greedy)[0] for p in prompts]
    assert [c.completion_ids for c in batched] == [c.completion_ids for c in single]
    for a, b in zip(batched, single, strict=True):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_micro_batcher_packs_concurrent_requests(tiny_model):
    model, tokenizer = tiny_model
    backend = HFBackend(model, tokenizer, max_batch_size=64)
    prompts = _prompts(tokenizer, 12)

    async def many():
        return await asyncio.gather(*(backend.generate(p, Sampling(0.8, 8)) for p in prompts))

    completions = asyncio.run(many())
    assert len(completions) == 12
    assert backend.batches_run == 1
    assert all(len(c.completion_ids) == len(c.logprobs) > 0 for c in completions)


def test_sampler_logprobs_match_trainer_recomputation(tiny_model):
    """The Turn's log-probs are what the trainer recomputes for the same tokens (tolerance 1e-4)."""
    model, tokenizer = tiny_model
    backend = HFBackend(model, tokenizer)
    torch.manual_seed(0)
    prompts = _prompts(tokenizer, 6)
    rows = []
    for temperature in (0.6, 1.0):
        for prompt, completion in zip(
            prompts, backend.generate_batch(prompts, Sampling(temperature, 16)), strict=True
        ):
            rows.append(
                Row(
                    prompt, completion.completion_ids, completion.logprobs, 0.0, temperature, 0, "r"
                )
            )
    batch = pack_rows(rows, tokenizer.pad_token_id)
    with torch.no_grad():
        recomputed = completion_logprobs(model, batch)
    mask = batch["completion_mask"]
    assert float(((recomputed - batch["sampler_logprobs"]).abs() * mask).max()) < 1e-4


def test_policy_records_turns_with_adapter_version(tiny_model):
    model, tokenizer = tiny_model
    backend = HFBackend(model, tokenizer)
    backend.adapter_version = 7
    policy = Policy(backend, tokenizer, "task-1", max_new_tokens=6)
    text = asyncio.run(policy.chat("planner", "system prompt", "Question: rent", temperature=0.6))
    (turn,) = policy.trajectory.turns
    assert turn.role == "planner" and turn.adapter_version == 7 and turn.temperature == 0.6
    assert turn.text == text
    assert tokenizer.decode(turn.prompt_ids).endswith("<|im_start|>assistant\n")


class _Recorder(MicroBatchedBackend):
    """Answers every prompt with itself and records the prompts of each batch."""

    def __init__(self, deterministic: bool):
        super().__init__(batch_wait_ms=2.0, deterministic=deterministic)
        self.batches: list[list[list[int]]] = []

    def generate_batch(self, prompts, sampling):
        self.batches.append(prompts)
        return [Completion(list(p), [0.0] * len(p), 0) for p in prompts]


def _episodes(backend, workload, episodes=None):
    """Six episodes of three model calls each; `workload(i, call)` runs between calls, the way an
    env parses and retrieves between its agents' turns."""
    episodes = episodes or RunningEpisodes()

    async def episode(i):
        with episodes.track(i):
            for call in range(3):
                await workload(i, call)
                await backend.generate([i, call], Sampling(1.0, 4))

    async def main():
        await asyncio.gather(*(episode(i) for i in range(6)))

    asyncio.run(main())
    return backend.batches


async def _slow_tool(i, call):
    # Two episodes in three wait on something other than the model (a judge, a remote index)
    # for longer than the 2 ms window; the others go straight to their next call.
    await asyncio.sleep(0.005 * (i % 3))


def test_deterministic_batches_wait_for_every_running_episode():
    batches = _episodes(_Recorder(deterministic=True), _slow_tool)
    assert batches == [[[i, call] for i in range(6)] for call in range(3)]


def test_timed_window_cuts_batches_by_timing():
    """What `deterministic` prevents: episodes that miss the window land in other batches, so the
    batches (and the sampler's random draws) depend on how long things took."""
    assert len(_episodes(_Recorder(deterministic=False), _slow_tool)) > 3


def test_deterministic_batcher_with_concurrent_calls_in_one_episode():
    backend = _Recorder(deterministic=True)
    episodes = RunningEpisodes()

    async def episode(i):
        with episodes.track(i):
            await asyncio.gather(*(backend.generate([i, j], Sampling()) for j in range(2)))
            await asyncio.sleep(0.005 * (i % 2))
            await backend.generate([i, 2], Sampling())

    async def main():
        await asyncio.gather(*(episode(i) for i in range(4)))

    asyncio.run(main())
    assert backend.batches == [
        [[i, j] for i in range(4) for j in range(2)],
        [[i, 2] for i in range(4)],
    ]
    assert episodes.running == episodes.waiting == 0


@pytest.mark.parametrize("deterministic", [True, False])
def test_requests_outside_episodes_are_batched_by_the_window(deterministic):
    backend = _Recorder(deterministic)

    async def main():
        await asyncio.gather(*(backend.generate([i], Sampling()) for i in range(5)))

    asyncio.run(main())
    assert backend.batches == [[[i] for i in range(5)]]


class _ToolEnv:
    """Episodes of three model calls with a tool call of uneven latency between them."""

    def __init__(self, backend):
        self.backend = backend

    async def run_episode(self, task, policy):
        index = int(task.id)
        for call in range(3):
            await asyncio.sleep(0.003 * ((index + call) % 3))
            await self.backend.generate([index, call], Sampling())
        return Trajectory(task_id=task.id)


def test_engine_with_a_concurrency_limit_batches_the_same_every_run():
    """Fewer slots than episodes: an episode starts only when another ends, and the batches are
    still the same in every run (and the batcher never waits for an episode that has no slot)."""
    runs = []
    for _ in range(2):
        backend = _Recorder(deterministic=True)
        tasks = [Task(id=str(i), inputs={}, gold=[]) for i in range(7)]
        run_groups(_ToolEnv(backend), tasks, 1, lambda task: None, max_concurrent=3, progress=False)
        runs.append(backend.batches)
    assert runs[0] == runs[1]
    assert sorted(r for batch in runs[0] for r in batch) == [
        [i, c] for i in range(7) for c in range(3)
    ]
