"""Padding-free updates (`grpo.padding_free`): a micro-batch's rows end to end in one sequence.

The padded layouts hold every row (`learner.pack_rows`) or every pack of rows sharing a prefix
(`shared_prefix.pack_shared`) at the width of the micro-batch's longest, and the forward pays for
the padding. Here the same packs are laid end to end in one sequence of exactly their tokens, so
a micro-batch costs its real tokens, and a token budget (`grpo.micro_batch_tokens`) counts those.
Position ids restart with each pack, and `prefix_attention.FlatLayout` keeps each pack's
attention to itself (FlexAttention over a block mask on CUDA, as TRL's and verl's padding-free
modes do with flash attention's variable-length kernel). With `grpo.shared_prefix` the packs are
its prefix groups, so a shared prefix is encoded once; without it each row is a pack of its own,
its prompt the prefix and its completion the one suffix, which attends as a causal row does.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

from lexrl.train.advantages import Row
from lexrl.train.shared_prefix import (
    MIN_SHARED_TOKENS,
    pack_shared,
    packed_lengths,
    shared_packs,
    split_shared_micro_batches,
)

NO_SHARING = sys.maxsize
"""A shortest shared prefix no prompt reaches: every row is a pack of its own."""


def _min_tokens(shared: bool) -> int:
    return MIN_SHARED_TOKENS if shared else NO_SHARING


def flat_size(rows: Sequence[Row], min_tokens: int) -> int:
    """Tokens of the one sequence `rows` make without padding: every pack of
    `shared_prefix.shared_packs(rows, min_tokens)`, end to end."""
    return sum(packed_lengths(rows, shared_packs(rows, min_tokens)))


def split_padding_free_micro_batches(
    rows: Sequence[Row], max_rows: int, max_tokens: int | None, shared: bool
) -> list[list[Row]]:
    """The step's rows cut into micro-batches as `shared_prefix.split_shared_micro_batches` cuts
    them (pack by pack, so a group's rows share micro-batches; without `shared` every row is a
    pack, in rollout order), but with `max_tokens` bounding the padding-free sequence
    (`flat_size`) rather than packs x longest pack."""
    return split_shared_micro_batches(rows, max_rows, max_tokens, _min_tokens(shared), flat_size)


def pack_padding_free(rows: Sequence[Row], pad_id: int, shared: bool) -> dict[str, torch.Tensor]:
    """`shared_prefix.pack_shared`'s packs (each row alone unless `shared`) end to end, without
    their padding.

    Returns, for M = `flat_size` tokens and B rows (in the given order; T = longest
    completion):
    - input_ids, position_ids, segment_ids [1, M] as `pack_shared` gives them per pack, and
      pack_ids [1, M]: the pack each position belongs to (`prefix_attention.FlatLayout`);
    - hidden_index [B, T]: index into the M positions of the one whose output predicts each
      completion token; targets, completion_mask, sampler_logprobs [B, T]; advantages,
      temperatures [B], as `pack_shared` gives them.
    """
    packed = pack_shared(rows, pad_id, _min_tokens(shared))
    packs, width = packed["segment_ids"].shape
    real = packed["segment_ids"].flatten() >= 0
    # A padded position's index in the sequence without padding (the real ones count up from 0).
    unpadded = real.cumsum(0) - 1
    pack_ids = torch.arange(packs).repeat_interleave(width)

    def flat(values: torch.Tensor) -> torch.Tensor:
        return values.flatten()[real].unsqueeze(0)

    return {
        "input_ids": flat(packed["input_ids"]),
        "position_ids": flat(packed["position_ids"]),
        "segment_ids": flat(packed["segment_ids"]),
        "pack_ids": flat(pack_ids),
        "hidden_index": unpadded[packed["hidden_index"]],
        **{
            key: packed[key]
            for key in (
                "targets",
                "completion_mask",
                "sampler_logprobs",
                "advantages",
                "temperatures",
            )
        },
    }
