"""`grpo.padding_free`: a micro-batch's rows (or shared-prefix packs) end to end in one sequence,
with the padded layouts' log-probs and gradients, on the tiny model (float32, CPU)."""

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask

from lexrl.train.learner import completion_logprobs, pack_rows
from lexrl.train.padding_free import (
    NO_SHARING,
    flat_size,
    pack_padding_free,
    split_padding_free_micro_batches,
)
from lexrl.train.prefix_attention import FlatLayout, flat_attention
from lexrl.train.shared_prefix import MIN_SHARED_TOKENS, pack_shared
from tests.train.test_learner import UPDATE_METRICS, assert_same_update
from tests.train.test_logprobs import _policy
from tests.train.test_shared_prefix import (
    _hand_row,
    _step_rows,
    assert_gradients_equal_the_padded_rows,
)


def _trained(rows):
    return sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)


def test_rows_alone_lie_end_to_end_with_positions_restarting():
    rows = [_hand_row([5, 6, 7], (8, 9)), _hand_row([10, 11], (12,))]
    batch = pack_padding_free(rows, pad_id=0, shared=False)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9, 10, 11, 12]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0, 1, 2]]
    assert batch["pack_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1]]
    assert batch["segment_ids"].tolist() == [[0, 0, 0, 1, 1, 0, 0, 1]]
    # Completion token t of a row is predicted by the position before it; unused slots are 0.
    assert batch["hidden_index"].tolist() == [[2, 3], [6, 0]]
    assert batch["targets"].tolist() == [[8, 9], [12, 0]]
    assert batch["completion_mask"].tolist() == [[1, 1], [1, 0]]


def test_a_shared_prefix_is_laid_out_once_and_nothing_is_padding():
    rows = _step_rows()
    batch = pack_padding_free(rows, pad_id=0, shared=True)
    padded = pack_shared(rows, pad_id=0)
    assert batch["input_ids"].shape == (1, flat_size(rows, MIN_SHARED_TOKENS))
    assert batch["input_ids"].shape[1] == int((padded["segment_ids"] >= 0).sum())
    assert batch["input_ids"].shape[1] < padded["input_ids"].numel() < _trained(rows)
    assert flat_size(rows, NO_SHARING) == _trained(rows)
    # Every completion token is read from the position the padded pack predicts it from.
    hidden = padded["input_ids"].flatten()[padded["hidden_index"]]
    assert batch["input_ids"][0][batch["hidden_index"]].equal(hidden)


def _dense_rule(pack_ids, segment_ids):
    """The rule written out query by query: same pack, not later, prefix or own segment."""
    length = len(pack_ids)
    allowed = torch.zeros(length, length, dtype=torch.bool)
    for q in range(length):
        for k in range(q + 1):
            same = pack_ids[q] == pack_ids[k]
            allowed[q, k] = same and (segment_ids[k] == 0 or segment_ids[k] == segment_ids[q])
    return allowed


def test_the_mask_keeps_packs_apart_and_suffixes_from_each_other():
    batch = pack_padding_free(_step_rows()[:7], pad_id=0, shared=True)
    layout = FlatLayout.from_ids(batch["pack_ids"], batch["segment_ids"])
    expected = _dense_rule(batch["pack_ids"][0].tolist(), batch["segment_ids"][0].tolist())
    assert not isinstance(layout.mask, BlockMask)  # CPU: FlexAttention has no backward here
    assert layout.mask[0, 0].equal(expected)


@pytest.mark.slow
def test_flex_attention_over_the_block_mask_equals_the_dense_path():
    """The CUDA path (the block mask, compiled FlexAttention) run forward on the CPU, where it has
    no backward, and the CPU's dense path, with 4 query heads on 2 key-value heads, both against
    the rule written out with the key-value heads repeated."""
    batch = pack_padding_free(_step_rows(), pad_id=0, shared=True)
    dense_layout = FlatLayout.from_ids(batch["pack_ids"], batch["segment_ids"])
    flex_layout = FlatLayout.from_ids(batch["pack_ids"], batch["segment_ids"], flex=True)
    assert not isinstance(dense_layout.mask, BlockMask)
    assert isinstance(flex_layout.mask, BlockMask)
    length = batch["input_ids"].shape[1]
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(1, 4, length, 8, generator=generator)
    key, value = (torch.randn(1, 2, length, 8, generator=generator) for _ in range(2))
    allowed = _dense_rule(batch["pack_ids"][0].tolist(), batch["segment_ids"][0].tolist())
    reference = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(2, 1), value.repeat_interleave(2, 1), attn_mask=allowed
    ).transpose(1, 2)
    with torch.no_grad():
        dense = flat_attention(query, key, value, dense_layout, scaling=None)
        flex = flat_attention(query, key, value, flex_layout, scaling=None)
    torch.testing.assert_close(dense, reference, rtol=0, atol=1e-5)
    torch.testing.assert_close(flex, reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize("shared", [False, True], ids=["rows", "shared_prefix"])
def test_logprobs_equal_the_padded_rows(tiny_model, shared):
    policy, pad_id = _policy(tiny_model)
    rows = _step_rows(seed=1)
    with torch.no_grad():
        expected = completion_logprobs(policy, pack_rows(rows, pad_id), chunk_tokens=7)
        actual = completion_logprobs(
            policy, pack_padding_free(rows, pad_id, shared), chunk_tokens=7
        )
    mask = pack_rows(rows, pad_id)["completion_mask"].bool()
    torch.testing.assert_close(actual[mask], expected[mask], rtol=0, atol=1e-5)


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("shared", [False, True], ids=["rows", "shared_prefix"])
def test_gradients_equal_the_padded_rows(tiny_model, shared, checkpointing):
    def pack(rows, pad_id):
        return pack_padding_free(rows, pad_id, shared)

    assert_gradients_equal_the_padded_rows(tiny_model, pack, checkpointing)


def test_a_token_budget_counts_real_tokens_and_keeps_every_row():
    rows = _step_rows()
    batches = split_padding_free_micro_batches(rows, max_rows=6, max_tokens=90, shared=True)
    assert sorted(rows.index(r) for b in batches for r in b) == list(range(len(rows)))
    for batch in batches:
        packed = pack_padding_free(batch, pad_id=0, shared=True)
        assert packed["input_ids"].numel() <= 90 or len(batch) == 1
    # Without padding more rows fit the same budget than in the padded packs.
    from lexrl.train.shared_prefix import split_shared_micro_batches

    assert len(batches) <= len(split_shared_micro_batches(rows, 6, 90))
    by_rows = split_padding_free_micro_batches(rows, max_rows=4, max_tokens=None, shared=False)
    assert [r for b in by_rows for r in b] == rows  # rows alone: rollout order


@pytest.mark.parametrize(
    "grpo",
    [
        {"micro_batch_size": 2, "gradient_checkpointing": True},
        {"micro_batch_tokens": 150, "beta": 0.1},
        {"micro_batch_tokens": 150, "shared_prefix": True, "gradient_checkpointing": True},
    ],
    ids=["micro_batches_checkpointing", "token_budget_reference", "shared_prefix_checkpointing"],
)
def test_a_padding_free_update_hands_the_optimizer_the_padded_gradients(tiny_model_path, grpo):
    padded = {k: v for k, v in grpo.items() if k != "shared_prefix"}
    padding_free = {**grpo, "padding_free": True}
    rows = _step_rows(seed=4)
    assert_same_update(tiny_model_path, rows, padded, padding_free, UPDATE_METRICS, 1e-9)
