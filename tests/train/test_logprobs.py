"""Completion log-probs: chunked over the vocabulary projection, optionally with activation
checkpointing, against the plain full-vocabulary log-softmax."""

import pytest
import torch

from lexrl.config import LoraConfig
from lexrl.models import add_lora
from lexrl.train.learner import completion_logprobs, pack_rows
from tests.train.test_learner import _rows


def _full_logprobs(model, batch):
    """The reference: every completion position's full float32 log-softmax, kept whole."""
    width = batch["completion_mask"].shape[1]
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=width + 1,
    ).logits[:, :-1]
    logits = logits.float() / batch["temperatures"].view(-1, 1, 1)
    targets = batch["input_ids"][:, -width:]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _policy(tiny_model):
    model, tokenizer = tiny_model
    policy = add_lora(model, LoraConfig(r=4, alpha=8), seed=0)
    # A non-zero adapter, so its gradients are not the trivial ones of a zero-init B matrix.
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.02, generator=torch.Generator().manual_seed(1))
    return policy, tokenizer.pad_token_id


def _batch(pad_id, temperature=1.0):
    rows = _rows([1.0, -0.5, 0.25, 2.0, -1.0])
    for row in rows:
        row.temperature = temperature
    return pack_rows(rows, pad_id)


@pytest.mark.parametrize("chunk_tokens", [1, 3, 7, 10_000])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_logprobs_equal_the_full_log_softmax(tiny_model, chunk_tokens, temperature):
    policy, pad_id = _policy(tiny_model)
    batch = _batch(pad_id, temperature)
    with torch.no_grad():
        expected = _full_logprobs(policy, batch)
        chunked = completion_logprobs(policy, batch, chunk_tokens=chunk_tokens)
    assert chunked.shape == expected.shape
    torch.testing.assert_close(chunked, expected, rtol=0, atol=1e-5)


def _loss_and_grads(policy, batch, chunk_tokens, full=False):
    policy.zero_grad(set_to_none=True)
    policy.train()
    logprobs = (
        _full_logprobs(policy, batch)
        if full
        else completion_logprobs(policy, batch, chunk_tokens=chunk_tokens)
    )
    loss = -(logprobs * batch["completion_mask"] * batch["advantages"].view(-1, 1)).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad}
    return loss.detach(), grads


@pytest.mark.parametrize("checkpointing", [False, True])
def test_gradients_equal_the_full_log_softmax_with_and_without_checkpointing(
    tiny_model, checkpointing
):
    policy, pad_id = _policy(tiny_model)
    batch = _batch(pad_id, 0.8)
    expected_loss, expected = _loss_and_grads(policy, batch, 0, full=True)
    if checkpointing:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        assert policy.get_base_model().is_gradient_checkpointing
    loss, grads = _loss_and_grads(policy, batch, chunk_tokens=4)
    # Float-order noise scales with the values summed: a loss of ~50 over fp32 tokens, and each
    # gradient relative to its largest element (no test may depend on one CPU's rounding).
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=0)
    assert grads.keys() == expected.keys() and grads
    for name in grads:
        scale = expected[name].abs().max()
        assert scale > 0, name
        torch.testing.assert_close(
            grads[name], expected[name], rtol=1e-5, atol=1e-5 * scale.item(), msg=name
        )
