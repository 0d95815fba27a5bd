"""Prefix Grouper's attention for packed rows (`grpo.shared_prefix`).

A pack is `[prefix | suffix_1 | suffix_2 | ...]` (`shared_prefix.pack_shared`). Prefix Grouper
(Liu et al. 2025, arXiv 2506.05433, section 3) splits its attention in two: the prefix's queries
attend causally over the prefix, and each suffix's queries over the prefix and their own suffix.
No suffix ever scores another suffix, so a pack of K suffixes costs K x suffix x (prefix +
suffix) scores (as the repeated rows' suffixes do) plus the prefix's once, whatever K is; a mask
over the whole pack would score (prefix + K x suffix)^2, which for a task's later calls (long
suffixes) costs more than the linear layers save.

How it enters the model: transformers picks a layer's attention function by the config's
`_attn_implementation` name from its `AttentionInterface`. `enable` registers a name that wraps
the model's own implementation and points the config at it; the wrapper runs the grouped
attention when the layer's attention mask is a `PackLayout` and hands every other call (a
generation, an evaluation, the repeated form) to the model's own function unchanged. The model
takes the layout through its `attention_mask` argument as a mapping by layer type, the form
transformers accepts for masks prepared in advance (`generate` uses it), so no mask is built and
no library code is patched. Gradient checkpointing recomputes a layer with the same arguments,
so it runs the same attention.

`grpo.padding_free` lays a micro-batch's packs end to end in one sequence with no padding
(`padding_free.pack_padding_free`) and hands the layers a `FlatLayout` instead: one attention over
that sequence whose mask (same pack, causal, and a key in the prefix or the query's own suffix)
gives every query the keys the grouped attention gives it. On CUDA it runs PyTorch's
FlexAttention over a block mask, which skips the blocks the mask rules out and takes the
key-value heads as they are (`enable_gqa`); FlexAttention has no backward on the CPU (torch
2.13), so there the same mask, made dense, goes to scaled-dot-product attention.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

PREFIX = "lexrl_prefix_grouper+"
"""The registered implementation's name: this prefix and the model's own implementation."""


@dataclass(frozen=True)
class PackLayout:
    """Where each pack's prefix and suffixes lie in the packed [S, L] positions, as gathers.

    S packs of width L, N suffixes; positions are flat indices into S x L. Built once per
    forward (`from_segments`) and handed to every layer."""

    prefix_index: torch.Tensor
    """[S, P] each pack's prefix positions (P: the longest prefix; padded with the pack's first
    position)."""
    suffix_index: torch.Tensor
    """[N, U] each suffix's positions (U: the longest suffix; padded with its first position)."""
    suffix_pack: torch.Tensor
    """[N] the pack each suffix belongs to."""
    prefix_mask: torch.Tensor
    """[S, 1, P, P] bool: a prefix query sees the prefix up to itself (padding keys never)."""
    suffix_mask: torch.Tensor
    """[N, 1, U, P + U] bool: a suffix query sees its pack's prefix and its suffix up to itself."""
    output_index: torch.Tensor
    """[M] the flat positions of every prefix then every suffix token (no padding), in the order
    of the attention outputs gathered by `prefix_valid` and `suffix_valid`."""
    prefix_valid: torch.Tensor
    """[S, P] bool: a real prefix position."""
    suffix_valid: torch.Tensor
    """[N, U] bool: a real suffix position."""

    @classmethod
    def from_segments(cls, segment_ids: torch.Tensor) -> PackLayout:
        """segment_ids [S, L] (`pack_shared`: 0 on the prefix, j on the j-th suffix, -1 on
        padding; each segment contiguous, the prefix first) -> the layout, on their device."""
        packs, width = segment_ids.shape
        device = segment_ids.device
        segments = segment_ids.cpu()
        prefix_lengths = (segments == 0).sum(1)
        # (pack, first position, length) of every suffix, pack by pack, segment by segment.
        suffixes = [
            (s, int(where[0]), len(where))
            for s in range(packs)
            for j in range(1, int(segments[s].max()) + 1)
            for where in [(segments[s] == j).nonzero().flatten()]
        ]
        suffix_pack = torch.tensor([s for s, _, _ in suffixes])
        starts = torch.tensor([start for _, start, _ in suffixes])
        lengths = torch.tensor([length for _, _, length in suffixes])

        prefix_offsets = torch.arange(int(prefix_lengths.max()))
        prefix_valid = prefix_offsets.unsqueeze(0) < prefix_lengths.unsqueeze(1)
        prefix_index = torch.arange(packs).unsqueeze(1) * width + prefix_valid * prefix_offsets
        suffix_offsets = torch.arange(int(lengths.max()))
        suffix_valid = suffix_offsets.unsqueeze(0) < lengths.unsqueeze(1)
        suffix_index = (suffix_pack * width + starts).unsqueeze(1) + suffix_valid * suffix_offsets

        def causal(size: int) -> torch.Tensor:
            return torch.ones(size, size, dtype=torch.bool).tril()

        prefix_mask = causal(len(prefix_offsets)) & prefix_valid.unsqueeze(1)
        sees_prefix = prefix_valid[suffix_pack].unsqueeze(1).expand(-1, len(suffix_offsets), -1)
        sees_suffix = causal(len(suffix_offsets)) & suffix_valid.unsqueeze(1)
        suffix_mask = torch.cat([sees_prefix, sees_suffix], dim=2)
        output_index = torch.cat([prefix_index[prefix_valid], suffix_index[suffix_valid]])
        return cls(
            prefix_index.to(device),
            suffix_index.to(device),
            suffix_pack.to(device),
            prefix_mask.unsqueeze(1).to(device),
            suffix_mask.unsqueeze(1).to(device),
            output_index.to(device),
            prefix_valid.to(device),
            suffix_valid.to(device),
        )


@dataclass(frozen=True)
class FlatLayout:
    """One padding-free sequence of packs (`padding_free.pack_padding_free`) as an attention mask.

    M positions; pack d holds `[prefix | suffix_1 | ...]` (a row of its own: its prompt, then its
    completion). A query attends to a key of its own pack at or before it that lies in the prefix
    or in the query's own segment: a row's causal attention, and Prefix Grouper's for a pack of
    several rows."""

    pack_ids: torch.Tensor
    """[M] the pack each position belongs to."""
    segment_ids: torch.Tensor = field(repr=False)
    """[M] 0 on a pack's prefix, j on its j-th suffix."""
    mask: BlockMask | torch.Tensor = field(repr=False)
    """The rule as FlexAttention's block mask (where FlexAttention runs), else as a dense
    [1, 1, M, M] bool mask; built once a forward and shared by every layer."""

    @classmethod
    def from_ids(
        cls, pack_ids: torch.Tensor, segment_ids: torch.Tensor, flex: bool | None = None
    ) -> FlatLayout:
        """pack_ids, segment_ids [1, M] (as the batch holds them) -> the layout, on their
        device, with a block mask if `flex` (None: on CUDA, the one device where FlexAttention
        runs a backward), else the dense mask."""
        packs, segments = pack_ids.flatten(), segment_ids.flatten()
        allows = mask_mod(packs, segments)
        length = len(packs)
        if pack_ids.is_cuda if flex is None else flex:
            mask = create_block_mask(allows, None, None, length, length, pack_ids.device)
        else:
            positions = torch.arange(length, device=pack_ids.device)
            mask = allows(None, None, positions.unsqueeze(1), positions.unsqueeze(0))[None, None]
        return cls(packs, segments, mask)


def mask_mod(pack_ids: torch.Tensor, segment_ids: torch.Tensor) -> Callable[..., torch.Tensor]:
    """`FlatLayout`'s rule as FlexAttention's `mask_mod` (a plain function, as
    `create_block_mask` requires): (batch, head, query, key) -> whether position `query` attends
    to position `key`. pack_ids, segment_ids [M]."""

    def allows(_batch: Any, _head: Any, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        same_pack = pack_ids[query] == pack_ids[key]
        visible = (segment_ids[key] == 0) | (segment_ids[key] == segment_ids[query])
        return same_pack & visible & (key <= query)

    return allows


def as_attention_mask(
    layout: PackLayout | FlatLayout, model_config: Any
) -> dict[str, PackLayout | FlatLayout]:
    """The `attention_mask` argument that hands `layout` to every layer: transformers takes a
    mapping by layer type as masks prepared in advance."""
    types = getattr(model_config, "layer_types", None) or ["full_attention"]
    return dict.fromkeys(set(types), layout)


_compiled_flex_attention: Callable[..., torch.Tensor] | None = None


def flex_attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: BlockMask,
    scaling: float | None,
) -> torch.Tensor:
    """FlexAttention over a block mask: query [1, H, M, D], key and value [1, G, M, D] ->
    [1, H, M, D]. Compiled once and reused: uncompiled, FlexAttention materialises every score."""
    global _compiled_flex_attention
    if torch.compiler.is_compiling():  # inside a compiled layer: dynamo traces it in place
        return flex_attention(query, key, value, block_mask=mask, scale=scaling, enable_gqa=True)
    if _compiled_flex_attention is None:
        _compiled_flex_attention = torch.compile(flex_attention)
    return _compiled_flex_attention(
        query, key, value, block_mask=mask, scale=scaling, enable_gqa=True
    )


def flat_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: FlatLayout,
    scaling: float | None,
) -> torch.Tensor:
    """Attention over one padding-free sequence by `layout`'s rule.

    query [1, H, M, D], key and value [1, G, M, D] (H a multiple of G) -> [1, M, H, D], as
    transformers' attention functions return it. FlexAttention where the layout has a block mask
    (CUDA); elsewhere scaled-dot-product attention under the dense mask, for the CPU, where
    FlexAttention cannot run a backward."""
    if isinstance(layout.mask, BlockMask):
        out = flex_attend(query, key, value, layout.mask, scaling)
    else:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=layout.mask, scale=scaling, enable_gqa=True
        )
    return out.transpose(1, 2)


Attend = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float | None], torch.Tensor
]
"""q [B, Q, H, D], k and v [B, K, G, D], a boolean mask [B, 1, Q, K] and the scaling -> [B, Q, H, D]."""


def sdpa_attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scaling: float | None
) -> torch.Tensor:
    """An `Attend` by PyTorch's scaled-dot-product attention, the keys and values repeated to
    the query heads: with a mask, the memory-efficient kernel refuses `enable_gqa`, and PyTorch
    would fall back to the math kernel where cuDNN's is not there (docs/benchmarks.md)."""
    repeat = q.shape[2] // k.shape[2]
    k = k.repeat_interleave(repeat, dim=2)
    v = v.repeat_interleave(repeat, dim=2)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask, scale=scaling
    )
    return out.transpose(1, 2)


# Eager inside compiled layers (`grpo.compile_layers`): inductor's CPU lowering of this
# attention's backward under dynamic shapes fails ("Invalid ranges [0:-1]", torch 2.13), and
# the matmuls inside are already whole kernels.
@torch.compiler.disable
def grouped_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: PackLayout,
    scaling: float | None,
    attend: Attend = sdpa_attend,
) -> torch.Tensor:
    """Prefix Grouper's attention over packs, each part attended by `attend`.

    query [S, H, L, D], key and value [S, G, L, D] (G key-value heads, H a multiple of G) ->
    [S, L, H, D], as transformers' attention functions return it; padding positions get zeros.
    """
    packs, heads, width, dim = query.shape

    def flat(states: torch.Tensor) -> torch.Tensor:
        """[S, heads, L, D] -> [S * L, heads, D]."""
        return states.transpose(1, 2).reshape(packs * width, states.shape[1], dim)

    q, k, v = flat(query), flat(key), flat(value)
    prefix_k, prefix_v = k[layout.prefix_index], v[layout.prefix_index]
    prefix_out = attend(q[layout.prefix_index], prefix_k, prefix_v, layout.prefix_mask, scaling)
    suffix_k = torch.cat([prefix_k[layout.suffix_pack], k[layout.suffix_index]], dim=1)
    suffix_v = torch.cat([prefix_v[layout.suffix_pack], v[layout.suffix_index]], dim=1)
    suffix_out = attend(q[layout.suffix_index], suffix_k, suffix_v, layout.suffix_mask, scaling)
    values = torch.cat([prefix_out[layout.prefix_valid], suffix_out[layout.suffix_valid]])
    out = values.new_zeros(packs * width, heads, dim).index_copy(0, layout.output_index, values)
    return out.view(packs, width, heads, dim)


def _wrapping(base: str) -> Callable[..., tuple[torch.Tensor, Any]]:
    """The attention function registered for `base`: grouped attention for a `PackLayout`,
    the model's own `base` implementation for anything else."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def attention(
        module: torch.nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: Any,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, Any]:
        if isinstance(attention_mask, PackLayout | FlatLayout):
            if kwargs.get("dropout"):
                raise ValueError(
                    "grpo.shared_prefix and grpo.padding_free: attention dropout is not supported"
                )
            attend = grouped_attention if isinstance(attention_mask, PackLayout) else flat_attention
            return attend(query, key, value, attention_mask, kwargs.get("scaling")), None
        if base in ALL_ATTENTION_FUNCTIONS:
            own = ALL_ATTENTION_FUNCTIONS[base]
        else:  # `eager` lives in each model's own module
            own = sys.modules[type(module).__module__].eager_attention_forward
        return own(module, query, key, value, attention_mask, *args, **kwargs)

    return attention


def enable(config: Any) -> str:
    """Point a transformers model config (and its text sub-config) at the wrapping
    implementation of its own attention; returns the name. Idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    base = config._attn_implementation
    if base.startswith(PREFIX):
        return base
    if base not in ALL_MASK_ATTENTION_FUNCTIONS:
        raise ValueError(
            "grpo.shared_prefix and grpo.padding_free cannot wrap the attention implementation "
            f"{base!r}: transformers has no mask function for it (sdpa, eager and flash "
            "attention are supported)"
        )
    name = PREFIX + base
    AttentionInterface.register(name, _wrapping(base))
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
    config._attn_implementation = name
    text = getattr(config, "text_config", None)
    if text is not None:
        text._attn_implementation = name
    return name
