"""`rollout.ignore_eos`: every completion is `max_new_tokens` long, sampled past end-of-sequence
tokens (not masked, not a stop), with the log-probs the trainer recomputes."""

from __future__ import annotations

import httpx
import pytest
import torch

from lexrl.config import load_config
from lexrl.generation import Sampling
from lexrl.policy import render_prompt
from lexrl.rollout.factory import make_backend
from lexrl.rollout.hf_backend import HFBackend
from lexrl.train.advantages import Row
from lexrl.train.learner import completion_logprobs, pack_rows

MAX_NEW_TOKENS = 24


@pytest.fixture()
def eos_prone(tiny_model):
    """The tiny model with +5 on the end-of-sequence logit, so that most completions sample it
    within MAX_NEW_TOKENS (its random weights alone almost never do). A hook on the vocabulary
    projection, so `generate` and the trainer's log-probs both see it."""
    model, tokenizer = tiny_model
    bias = torch.zeros(len(tokenizer))
    bias[tokenizer.eos_token_id] = 5.0
    hook = model.get_output_embeddings().register_forward_hook(lambda _m, _i, out: out + bias)
    yield model, tokenizer
    hook.remove()


def _prompts(tokenizer):
    questions = ["my boss has not paid me", "the landlord keeps the cash", "a car hit mine"]
    return [render_prompt(tokenizer, "You rewrite legal questions.", q) for q in questions] * 3


def test_hf_samples_past_eos_to_max_new_tokens_with_the_trainers_logprobs(eos_prone):
    model, tokenizer = eos_prone
    eos = tokenizer.eos_token_id
    prompts = _prompts(tokenizer)

    torch.manual_seed(0)
    stopping = HFBackend(model, tokenizer).generate_batch(prompts, Sampling(1.0, MAX_NEW_TOKENS))
    assert any(len(c.completion_ids) < MAX_NEW_TOKENS for c in stopping), "EOS should stop some"
    assert all(c.completion_ids.count(eos) <= 1 for c in stopping)

    rows = []
    for temperature in (0.7, 1.0):
        torch.manual_seed(0)
        backend = HFBackend(model, tokenizer, ignore_eos=True)
        completions = backend.generate_batch(prompts, Sampling(temperature, MAX_NEW_TOKENS))
        assert all(len(c.completion_ids) == len(c.logprobs) == MAX_NEW_TOKENS for c in completions)
        # Sampled past an EOS, which is kept in the completion like any other token.
        assert any(eos in c.completion_ids[:-1] for c in completions)
        rows += [
            Row(p, c.completion_ids, c.logprobs, 0.0, temperature, 0, "r")
            for p, c in zip(prompts, completions, strict=True)
        ]
    batch = pack_rows(rows, tokenizer.pad_token_id)
    assert bool(batch["completion_mask"].all())
    with torch.no_grad():
        recomputed = completion_logprobs(model, batch)
    assert float((recomputed - batch["sampler_logprobs"]).abs().max()) < 1e-4


def test_ignore_eos_reaches_the_hf_and_vllm_server_backends(tiny_model, tmp_path):
    model, tokenizer = tiny_model
    for value in (False, True):
        config = load_config(None, ["--rollout.ignore_eos", str(value).lower()])
        assert make_backend(config, model, tokenizer, "unused").ignore_eos is value

    config = load_config(None, ["--rollout.backend", "vllm-server", "--rollout.ignore_eos", "true"])
    backend = make_backend(config, model, tokenizer, "unused")
    sent = []

    def post(replica, route, payload):
        sent.append(payload)
        choice = {"logprobs": {"tokens": ["token_id:5", "token_id:2"], "token_logprobs": [-1, -2]}}
        return httpx.Response(200, json={"choices": [choice]})

    backend._post = post
    try:
        completion = backend.complete([1, 2, 3], Sampling(1.0, 2))
    finally:
        backend.close()
    assert completion.completion_ids == [5, 2]
    assert sent[0]["ignore_eos"] is True and sent[0]["max_tokens"] == 2


def test_vllm_engine_sampling_params_ignore_eos():
    pytest.importorskip("vllm")
    from lexrl.rollout.vllm_engine import VLLMEngineBackend

    class FakeLLM:
        def generate(self, prompts, params, **_):
            self.params = params
            return []

    backend = VLLMEngineBackend.__new__(VLLMEngineBackend)
    backend.llm, backend.adapter_version, backend._lora = FakeLLM(), 0, None
    for value in (False, True):
        backend.ignore_eos = value
        assert backend.generate_batch([[1, 2]], Sampling(1.0, 8)) == []
        assert backend.llm.params.ignore_eos is value
        assert backend.llm.params.max_tokens == 8
