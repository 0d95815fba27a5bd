"""Shared-prefix updates (`grpo.shared_prefix`): encode a prompt prefix that several rows share once.

The K trajectories of a task start from one prompt, and their later calls repeat the
instructions and task text up to the first sampled token, so most of a step's trained tokens are
copies of a few prefixes. Prefix Grouper (Liu et al. 2025, arXiv 2506.05433) encodes each shared
prefix once and lets every row's suffix attend to it; the outputs, and so the gradients, are the
repeated form's.

How, here: each prefix group of a micro-batch becomes one packed sequence,
`[prefix | suffix_1 | suffix_2 | ...]` (a suffix is the rest of a row's prompt and its
completion), with position ids restarting at the prefix length for every suffix, and segment ids
from which `prefix_attention.PackLayout` lays out Prefix Grouper's attention: the prefix attends
over itself, each suffix over the prefix and itself, never over another suffix. That is one
ordinary forward of the model per micro-batch, so:
- DDP and ZeRO-2 see the same forward/backward pattern as the repeated form (one forward, one
  backward per micro-batch; `lexrl.train.learner`'s rules hold unchanged);
- transformers' gradient checkpointing works as it does for the repeated form (no KV cache, which
  transformers switches off under checkpointing in train mode);
- no library code is patched: the attention enters through transformers' `AttentionInterface`
  (`prefix_attention.enable`). The `prefix-grouper` package (0.0.1) also swaps the model's
  attention, but for flash-attention's 2D masks and its own calling convention; the alternative
  of a prefix KV cache expanded to the group runs two forwards per micro-batch (DDP wants one) and
  needs the cache that checkpointing disables.
Since no suffix scores another, a pack costs no more attention than its rows repeated, and the
linear layers, most of the work, see each prefix token once per pack.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from lexrl.train.advantages import Row

MIN_SHARED_TOKENS = 32
"""Shortest prefix worth sharing: below it the packing saves less than its bookkeeping."""


@dataclass(frozen=True)
class PrefixGroup:
    """Rows encoded as one packed sequence after their common prompt prefix."""

    rows: tuple[int, ...]
    """Indices into the grouped rows, ascending."""
    prefix_length: int
    """Tokens at the start of every row's prompt that the group encodes once (a lone row: its
    whole prompt)."""


def group_by_prefix(
    rows: Sequence[Row], min_tokens: int = MIN_SHARED_TOKENS
) -> tuple[list[PrefixGroup], float]:
    """Partition `rows` into prefix groups and the share of trained tokens the sharing saves.

    rows: N rows; prompt_ids [P_i], completion_ids [T_i]. A group's prefix is the longest common
    prefix of its rows' prompt ids (never a completion token) and at least `min_tokens` long;
    a row that shares no such prefix is a group of its own. Rows sorted by prompt put every set of
    rows with a common prefix side by side, so the groups are runs of that order, and the
    partition chosen maximises the repeated prefix tokens saved, sum over groups of
    (rows - 1) x prefix length (a dynamic programme over the runs): it keeps the K rows of one
    task together on their long task prompt rather than merging two tasks on the system prompt
    they share. Returns the groups (ordered by their first row) and saved / sum(P_i + T_i).
    """
    order = sorted(range(len(rows)), key=lambda i: (rows[i].prompt_ids, i))
    # next_lcp[k]: common prefix of the k-th and (k+1)-th prompts in sorted order; the common
    # prefix of a run is the minimum over its neighbours.
    next_lcp = [
        len(os.path.commonprefix([rows[a].prompt_ids, rows[b].prompt_ids]))
        for a, b in zip(order, order[1:], strict=False)
    ]
    # best[j]: the most tokens saved by grouping the first j sorted rows; cut[j]: where the last
    # group of that best partition starts.
    best, cut = [0] * (len(order) + 1), [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        best[end], cut[end] = best[end - 1], end - 1
        shared = None
        for start in range(end - 2, -1, -1):
            shared = next_lcp[start] if shared is None else min(shared, next_lcp[start])
            if shared < min_tokens:
                break
            saved = best[start] + (end - start - 1) * shared
            if saved > best[end]:
                best[end], cut[end] = saved, start
    groups = []
    end = len(order)
    while end:
        members = tuple(sorted(order[cut[end] : end]))
        prefix = min(len(rows[i].prompt_ids) for i in members)
        if len(members) > 1:
            prefix = min(next_lcp[cut[end] : end - 1])
        groups.append(PrefixGroup(members, prefix))
        end = cut[end]
    groups.sort(key=lambda g: g.rows[0])
    trained = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
    return groups, best[-1] / max(trained, 1)


def _trained(row: Row) -> int:
    return len(row.prompt_ids) + len(row.completion_ids)


def _by_length(rows: Sequence[Row], group: PrefixGroup) -> list[int]:
    """A group's rows, shortest first: rows of like length side by side pad less and pack more."""
    return sorted(group.rows, key=lambda i: (_trained(rows[i]), i))


def packed_lengths(rows: Sequence[Row], packs: Sequence[PrefixGroup]) -> list[int]:
    """Tokens of each packed sequence: its prefix once plus every row's suffix."""
    return [
        p.prefix_length + sum(_trained(rows[i]) - p.prefix_length for i in p.rows) for p in packs
    ]


def packed_size(rows: Sequence[Row], min_tokens: int = MIN_SHARED_TOKENS) -> int:
    """Positions `pack_shared` lays `rows` out in, padding included: packs x longest pack."""
    lengths = packed_lengths(rows, shared_packs(rows, min_tokens))
    return len(lengths) * max(lengths)


def shared_packs(rows: Sequence[Row], min_tokens: int = MIN_SHARED_TOKENS) -> list[PrefixGroup]:
    """The packs `pack_shared` lays `rows` out in: one per prefix group, its rows shortest first
    (rows of like length side by side pad less when packs share a micro-batch)."""
    groups, _ = group_by_prefix(rows, min_tokens)
    return [PrefixGroup(tuple(_by_length(rows, g)), g.prefix_length) for g in groups]


def split_shared_micro_batches(
    rows: Sequence[Row],
    max_rows: int,
    max_tokens: int | None = None,
    min_tokens: int = MIN_SHARED_TOKENS,
    size: Callable[[Sequence[Row], int], int] = packed_size,
) -> list[list[Row]]:
    """`learner.split_micro_batches` for the shared layout: the step's rows ordered group by
    group (groups by first row, each group's rows shortest first) so that a group's rows share
    micro-batches, then cut every `max_rows` rows or, with `max_tokens`, greedily so that no
    micro-batch's `size` (by default its packed size, packs x longest pack, as `pack_shared` lays
    it out) exceeds `max_tokens`; a row whose pack alone exceeds it goes alone."""
    groups, _ = group_by_prefix(rows, min_tokens)
    ordered = [rows[i] for g in groups for i in _by_length(rows, g)]
    if max_tokens is None:
        return [ordered[i : i + max_rows] for i in range(0, len(ordered), max_rows)]
    batches: list[list[Row]] = []
    current: list[Row] = []
    for row in ordered:
        candidate = [*current, row]
        if current and size(candidate, min_tokens) > max_tokens:
            batches.append(current)
            candidate = [row]
        current = candidate
    if current:
        batches.append(current)
    return batches


def pack_shared(
    rows: Sequence[Row], pad_id: int, min_tokens: int = MIN_SHARED_TOKENS
) -> dict[str, torch.Tensor]:
    """`learner.pack_rows` for the shared layout: one packed sequence per pack of `shared_packs`.

    Pack s is `[prefix | suffix_1 | ... | pad]`, right-padded to the longest pack L; suffix_i is
    row i's prompt after the prefix, then its completion. Returns, for S packs and B rows (in the
    given order; T = longest completion):
    - input_ids, position_ids [S, L]: a suffix's positions continue from the prefix length, as in
      the row's own sequence;
    - segment_ids [S, L]: 0 on the prefix, j on the j-th suffix, -1 on padding
      (`prefix_attention.PackLayout` turns them into the attention's gathers on the device);
    - hidden_index [B, T]: flat index into the S x L positions of the one whose output predicts
      each completion token (the prefix's last position when the completion follows the prefix);
    - targets [B, T]: the completion tokens; completion_mask, sampler_logprobs [B, T]; advantages,
      temperatures [B], as `pack_rows` gives them.
    """
    packs = shared_packs(rows, min_tokens)
    width = max(packed_lengths(rows, packs))
    completion_width = max(len(r.completion_ids) for r in rows)
    input_ids = torch.full((len(packs), width), pad_id, dtype=torch.long)
    position_ids = torch.zeros(len(packs), width, dtype=torch.long)
    segment_ids = torch.full((len(packs), width), -1, dtype=torch.long)
    hidden_index = torch.zeros(len(rows), completion_width, dtype=torch.long)
    targets = torch.full((len(rows), completion_width), pad_id, dtype=torch.long)
    completion_mask = torch.zeros(len(rows), completion_width)
    sampler_logprobs = torch.zeros(len(rows), completion_width)
    for s, pack in enumerate(packs):
        prefix = pack.prefix_length
        input_ids[s, :prefix] = torch.tensor(rows[pack.rows[0]].prompt_ids[:prefix])
        position_ids[s, :prefix] = torch.arange(prefix)
        segment_ids[s, :prefix] = 0
        start = prefix
        for segment, i in enumerate(pack.rows, start=1):
            row = rows[i]
            suffix = row.prompt_ids[prefix:] + row.completion_ids
            end = start + len(suffix)
            input_ids[s, start:end] = torch.tensor(suffix)
            position_ids[s, start:end] = torch.arange(prefix, prefix + len(suffix))
            segment_ids[s, start:end] = segment
            # Completion token t sits at `first + t` and is predicted one position earlier; for
            # t = 0 with no prompt suffix that is the prefix's last token.
            first = start + len(row.prompt_ids) - prefix
            completion = len(row.completion_ids)
            predictors = torch.arange(first - 1, first - 1 + completion)
            if first == start:
                predictors[0] = prefix - 1
            hidden_index[i, :completion] = s * width + predictors
            targets[i, :completion] = torch.tensor(row.completion_ids)
            completion_mask[i, :completion] = 1
            sampler_logprobs[i, :completion] = torch.tensor(row.sampler_logprobs)
            start = end
    return {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "segment_ids": segment_ids,
        "hidden_index": hidden_index,
        "targets": targets,
        "completion_mask": completion_mask,
        "sampler_logprobs": sampler_logprobs,
        "advantages": torch.tensor([r.advantage for r in rows]),
        "temperatures": torch.tensor([r.temperature for r in rows]),
    }
