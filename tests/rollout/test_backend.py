import asyncio

import torch

from lexrl.rollout.backend import HFBackend, Sampling
from lexrl.rollout.policy import Policy, render_prompt
from lexrl.train.advantages import Row
from lexrl.train.learner import completion_logprobs, pack_rows


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
