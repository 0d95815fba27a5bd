"""Which scaled-dot-product kernel `grpo.shared_prefix`'s grouped attention runs on a GPU, and what
its forward + backward costs, beside the other ways of passing the same masks.

    python scripts/gpu_attention_check.py [--prefix 1500] [--suffix 200] [--suffixes 8]
        [--packs 1] [--device cuda] [--dtype bfloat16]

One layer's attention at Qwen3-4B's widths (32 query heads, 8 key-value heads of 128) over
`--packs` packs of a `--prefix`-token prefix and `--suffixes` suffixes of `--suffix` tokens each
(`PackLayout.from_segments`), forward and backward, in each of these forms:

- `lexrl`: `lexrl.train.prefix_attention.grouped_attention` as the trainer runs it;
- `bool`, `float`, `bool_padded`, `float_padded`: the same `grouped_attention` with its inner
  call (`attend`) written here: the suffix mask as given (boolean), as an additive bias in the
  query's dtype (0 / -inf), and each with the key length padded to a multiple of 16 (the
  memory-efficient kernel's alignment);
- `gqa`: the boolean mask without repeating keys and values to the query heads
  (`enable_gqa=True`).

Each form runs under the default backend choice and under each backend alone
(`torch.nn.attention.sdpa_kernel`: EFFICIENT_ATTENTION, FLASH_ATTENTION, MATH, CUDNN_ATTENTION);
a backend that refuses is a row with its reason. Per row: whether it ran, the peak memory the
forward + backward adds (`torch.cuda.max_memory_allocated`), milliseconds, the largest
difference from the `lexrl` form under MATH on real positions, and (default choice only) the
CUDA kernels the profiler saw whose names mention attention. One JSON line per row to stdout and
to $OUT/gpu_attention_check.jsonl when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lexrl.train.prefix_attention import (  # noqa: E402
    Attend,
    PackLayout,
    grouped_attention,
    sdpa_attend,
)

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
BACKENDS = {
    "default": None,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "flash": SDPBackend.FLASH_ATTENTION,
    "math": SDPBackend.MATH,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def layout_for(args: argparse.Namespace, device: str) -> PackLayout:
    width = args.prefix + args.suffixes * args.suffix
    row = [0] * args.prefix + [j for j in range(1, args.suffixes + 1) for _ in range(args.suffix)]
    segments = torch.tensor([row] * args.packs)
    assert segments.shape == (args.packs, width)
    return PackLayout.from_segments(segments.to(device))


def written_here(form: str) -> Attend:
    """The grouped attention's inner call with the suffix mask passed in another form."""
    pad = form.endswith("_padded")
    as_float = form.startswith("float")
    gqa = form == "gqa"

    def attend(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scaling: float | None
    ) -> torch.Tensor:
        if not gqa:
            k = k.repeat_interleave(HEADS // KV_HEADS, dim=2)
            v = v.repeat_interleave(HEADS // KV_HEADS, dim=2)
        if pad and k.shape[1] % 16:
            extra = 16 - k.shape[1] % 16
            k = F.pad(k, (0, 0, 0, 0, 0, extra))
            v = F.pad(v, (0, 0, 0, 0, 0, extra))
            mask = F.pad(mask, (0, extra), value=False)
        if as_float:
            mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(
                ~mask, float("-inf")
            )
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=mask,
            scale=scaling,
            enable_gqa=gqa,
        )
        return out.transpose(1, 2)

    return attend


def reset_memory(device: str) -> int:
    """Synchronise, reset the peak and return the memory allocated now (0 off a GPU)."""
    if not device.startswith("cuda"):
        return 0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def peak_mib(device: str, base: int) -> float | None:
    """Synchronise and return the peak above `base` in MiB (None off a GPU)."""
    if not device.startswith("cuda"):
        return None
    torch.cuda.synchronize()
    return round((torch.cuda.max_memory_allocated() - base) / 2**20, 1)


def measure(
    form: str,
    backend: str,
    layout: PackLayout,
    inputs: list[torch.Tensor],
    reference: torch.Tensor | None,
    device: str,
    profile: bool,
) -> dict[str, Any]:
    query, key, value = (t.detach().clone().requires_grad_() for t in inputs)
    attend = sdpa_attend if form == "lexrl" else written_here(form)

    def function(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, s: float) -> torch.Tensor:
        return grouped_attention(q, k, v, layout, s, attend)

    row = {"form": form, "backend": backend}
    context = sdpa_kernel(BACKENDS[backend]) if BACKENDS[backend] else nullcontext()
    try:
        with context, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):  # the first call compiles / autotunes
                base = reset_memory(device)
                start = time.perf_counter()
                out = function(query, key, value, HEAD_DIM**-0.5)
                out.float().square().sum().backward()
                row["peak_mib"] = peak_mib(device, base)
                row["ms"] = round((time.perf_counter() - start) * 1000, 2)
                result = out.detach()
                query.grad = key.grad = value.grad = None
                del out
            row["warnings"] = sorted({str(w.message)[:300] for w in caught})
            if profile:
                with torch.profiler.profile(
                    activities=[
                        torch.profiler.ProfilerActivity.CPU,
                        torch.profiler.ProfilerActivity.CUDA,
                    ]
                ) as prof:
                    function(query, key, value, HEAD_DIM**-0.5).float().square().sum().backward()
                    peak_mib(device, 0)
                names = {e.key for e in prof.key_averages()}
                row["kernels"] = sorted(
                    n[:120]
                    for n in names
                    if any(w in n.lower() for w in ("attention", "fmha", "flash", "softmax", "bmm"))
                )
        row["ok"] = True
        if reference is not None:
            real = layout.output_index
            flat = result.reshape(-1, HEADS, HEAD_DIM)[real].float()
            row["max_abs_diff"] = float((flat - reference).abs().max())
        else:
            row["result"] = result
    except RuntimeError as error:
        row["ok"] = False
        row["error"] = str(error)[:400]
        row["warnings"] = sorted({str(w.message)[:300] for w in caught})
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def repeated(inputs: list[torch.Tensor], device: str) -> dict[str, Any]:
    """The repeated form's attention over the same rows, for scale: every row prefix + suffix,
    causal, no mask (the kernel `lexrl train` without sharing gets)."""
    query, key, value = (t.detach().clone().requires_grad_() for t in inputs)
    row = {"form": "repeated_rows", "backend": "default"}
    for _ in range(2):
        base = reset_memory(device)
        start = time.perf_counter()
        out = F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=True)
        out.float().square().sum().backward()
        row["peak_mib"] = peak_mib(device, base)
        row["ms"] = round((time.perf_counter() - start) * 1000, 2)
        query.grad = key.grad = value.grad = None
    row["ok"] = True
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=int, default=1500)
    parser.add_argument("--suffix", type=int, default=200)
    parser.add_argument("--suffixes", type=int, default=8)
    parser.add_argument("--packs", type=int, default=1)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    device, dtype = args.device, getattr(torch, args.dtype)
    layout = layout_for(args, device)
    width = args.prefix + args.suffixes * args.suffix
    generator = torch.Generator(device=device).manual_seed(0)
    inputs = [
        torch.randn(
            args.packs, heads, width, HEAD_DIM, device=device, dtype=dtype, generator=generator
        )
        for heads in (HEADS, KV_HEADS, KV_HEADS)
    ]
    reference_row = measure("lexrl", "math", layout, inputs, None, device, profile=False)
    reference = (
        reference_row.pop("result").reshape(-1, HEADS, HEAD_DIM)[layout.output_index].float()
    )
    out_path = (
        Path(os.environ["OUT"]) / "gpu_attention_check.jsonl" if os.environ.get("OUT") else None
    )
    header = {
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else device,
        "torch": torch.__version__,
        "shape": vars(args),
    }
    print(json.dumps(header), flush=True)
    lines = [json.dumps(header)]
    for form in ("lexrl", "bool", "float", "bool_padded", "float_padded", "gqa"):
        for backend in BACKENDS:
            row = measure(form, backend, layout, inputs, reference, device, backend == "default")
            print(json.dumps(row), flush=True)
            lines.append(json.dumps(row))
    rows = [
        torch.randn(
            args.packs * args.suffixes,
            heads,
            args.prefix + args.suffix,
            HEAD_DIM,
            device=device,
            dtype=dtype,
            generator=generator,
        )
        for heads in (HEADS, KV_HEADS, KV_HEADS)
    ]
    row = repeated(rows, device)
    print(json.dumps(row), flush=True)
    lines.append(json.dumps(row))
    if out_path:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
