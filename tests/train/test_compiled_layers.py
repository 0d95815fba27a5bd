"""`grpo.compile_layers`: an update through `torch.compile`d decoder layers hands the optimizer
the eager update's gradients and reports its losses, on the tiny model (float32, inductor on the
CPU), with micro-batches, checkpointing, a reference model, shared prefixes and the padding-free
layout."""

import pytest
import torch
from torch._dynamo.utils import counters

from lexrl.train.learner import compile_decoder_layers, completion_logprobs, pack_rows
from tests.train.test_learner import UPDATE_METRICS, assert_same_update
from tests.train.test_logprobs import _policy
from tests.train.test_shared_prefix import _step_rows

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "grpo",
    [
        {"micro_batch_size": 2, "gradient_checkpointing": True, "beta": 0.1},
        {"micro_batch_tokens": 150, "shared_prefix": True, "gradient_checkpointing": True},
        {"micro_batch_tokens": 150, "shared_prefix": True, "padding_free": True},
    ],
    ids=[
        "micro_batches_checkpointing_reference",
        "shared_prefix_checkpointing",
        "shared_prefix_padding_free",
    ],
)
def test_a_compiled_update_hands_the_optimizer_the_eager_gradients(tiny_model_path, grpo):
    compiled = {**grpo, "compile_layers": True}
    assert_same_update(tiny_model_path, _step_rows(seed=4), grpo, compiled, UPDATE_METRICS, 1e-9)


def test_layers_run_compiled_with_gradients_and_eagerly_without(tiny_model):
    policy, pad_id = _policy(tiny_model)
    # Two lengths: the second runs through the same dynamic graphs.
    batches = [pack_rows(_step_rows(seed=6), pad_id), pack_rows(_step_rows(seed=7)[:5], pad_id)]
    assert batches[0]["input_ids"].shape != batches[1]["input_ids"].shape
    with torch.no_grad():
        expected = [completion_logprobs(policy, batch, chunk_tokens=7) for batch in batches]
    layers = policy.config.num_hidden_layers
    assert compile_decoder_layers(policy) == layers
    counters.clear()
    with torch.no_grad():
        eager = [completion_logprobs(policy, batch, chunk_tokens=7) for batch in batches]
    assert counters["stats"]["unique_graphs"] == 0
    compiled = [completion_logprobs(policy, batch, chunk_tokens=7).detach() for batch in batches]
    # One graph a layer (each layer is its own module); the second length compiles nothing new.
    assert counters["stats"]["unique_graphs"] == layers
    for values in (eager, compiled):
        for actual, reference in zip(values, expected, strict=True):
            torch.testing.assert_close(actual, reference, rtol=0, atol=1e-5)
