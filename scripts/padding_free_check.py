"""`grpo.padding_free` against the padded layouts on one device: log-probs and LoRA gradients.

    python scripts/padding_free_check.py [--device cuda] [--dtype float32] [--layers 2]

FlexAttention has no backward on the CPU (torch 2.13), so the CPU tests check the padding-free
layout through a dense mask, and only a GPU runs the path `grpo.padding_free` takes there: this
script is that check. A random Qwen3 of 2 layers with grouped query heads (8 query heads on 2
key-value heads of 32: the head ratio of Qwen3-4B) and a LoRA of r 8 on every projection gets one
step's rows of `scripts/gpu_bench.py` at short lengths (8 trajectories in tasks of 4, 2 turns of
64 + 16 tokens; the later turn shares half its prompt within the task). For each layout it computes
the completion log-probs and the gradients of a REINFORCE loss:
- `padded`: `learner.pack_rows`, every row padded to the longest (the reference);
- `shared`: `shared_prefix.pack_shared`;
- `padding_free`, `padding_free+shared`: `padding_free.pack_padding_free` without and with
  shared prefixes; on CUDA through FlexAttention's block mask, elsewhere the dense mask;
- with `--checkpointing on` (default) the last two again under gradient checkpointing.

One JSON line per layout: the largest log-prob difference from `padded` on completion tokens, the
gradients' largest difference relative to the largest gradient element and the relative norm
of the difference, and whether each is within `--tolerance` (default 1e-4 in float32; bf16's
rounding needs about 2e-2); a layout that raises is a line with `error`, and the others still
run. Exit 1 if any is not ok, so the GPU command fails visibly. With OUT set
the lines also go to $OUT/padding_free_check.jsonl.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lexrl.config import LoraConfig  # noqa: E402
from lexrl.models import add_lora  # noqa: E402
from lexrl.train.learner import completion_logprobs, pack_rows  # noqa: E402
from lexrl.train.padding_free import pack_padding_free  # noqa: E402
from lexrl.train.shared_prefix import pack_shared  # noqa: E402


def step_rows() -> list[Any]:
    """Short rows shaped as `scripts/gpu_bench.py` shapes a statute step's."""
    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "scripts" / "gpu_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.make_rows(8, "2x64+16", group_size=4, shared_fraction=0.5)


def build_policy(device: str, dtype: torch.dtype, layers: int) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        hidden_size=256,
        intermediate_size=512,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=32,
        vocab_size=152_000,
        num_hidden_layers=layers,
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM._from_config(config, dtype=dtype, attn_implementation="sdpa")
    policy = add_lora(model.to(device), LoraConfig(r=8, alpha=16), seed=0)
    # A non-zero B, so the gradients reach both LoRA matrices.
    with torch.no_grad():
        for name, parameter in policy.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.02)
    policy.train()
    return policy


LAYOUTS: dict[str, Callable[[list[Any]], dict[str, torch.Tensor]]] = {
    "padded": lambda rows: pack_rows(rows, 0),
    "shared": lambda rows: pack_shared(rows, 0),
    "padding_free": lambda rows: pack_padding_free(rows, 0, shared=False),
    "padding_free+shared": lambda rows: pack_padding_free(rows, 0, shared=True),
}


def logprobs_and_gradients(
    policy: torch.nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """[B, T] float32 log-probs and each LoRA weight's gradient of -sum(A x log-prob)."""
    policy.zero_grad(set_to_none=True)
    logprobs = completion_logprobs(policy, batch, chunk_tokens=256)
    loss = -(logprobs * batch["completion_mask"] * batch["advantages"].view(-1, 1)).sum()
    loss.backward()
    gradients = {n: p.grad.float() for n, p in policy.named_parameters() if p.grad is not None}
    return logprobs.detach().float(), gradients


def compare(
    name: str,
    reference: tuple[torch.Tensor, dict[str, torch.Tensor]],
    actual: tuple[torch.Tensor, dict[str, torch.Tensor]],
    mask: torch.Tensor,
    tolerance: float,
) -> dict[str, Any]:
    (expected_logprobs, expected), (logprobs, gradients) = reference, actual
    largest = max(float(g.abs().max()) for g in expected.values())
    element = max(float((gradients[n] - g).abs().max()) for n, g in expected.items()) / largest
    difference = torch.cat([(gradients[n] - g).flatten() for n, g in expected.items()]).norm()
    norm = torch.cat([g.flatten() for g in expected.values()]).norm()
    line = {
        "layout": name,
        "logprob_max_diff": float((logprobs - expected_logprobs)[mask].abs().max()),
        "grad_max_diff_over_largest": element,
        "grad_diff_norm_over_norm": float(difference / norm),
        "same_parameters": gradients.keys() == expected.keys(),
    }
    line["ok"] = line["same_parameters"] and all(
        line[key] <= tolerance
        for key in ("logprob_max_diff", "grad_max_diff_over_largest", "grad_diff_norm_over_norm")
    )
    return line


def check(
    device: str, dtype: str, layers: int, checkpointing: bool, tolerance: float
) -> list[dict[str, Any]]:
    policy = build_policy(device, getattr(torch, dtype), layers)
    rows = step_rows()
    batches = {
        name: {k: v.to(device) for k, v in layout(rows).items()} for name, layout in LAYOUTS.items()
    }
    mask = batches["padded"]["completion_mask"].bool()
    reference = logprobs_and_gradients(policy, batches["padded"])
    runs = [(name, False) for name in LAYOUTS if name != "padded"]
    if checkpointing:
        runs += [("padding_free", True), ("padding_free+shared", True)]
    lines = []
    for name, checkpointed in runs:
        if checkpointed:
            policy.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        label = name + ("+checkpointing" if checkpointed else "")
        try:
            actual = logprobs_and_gradients(policy, batches[name])
            line = compare(label, reference, actual, mask, tolerance)
        except Exception as error:  # noqa: BLE001 - the layout's line says why; the rest still run
            traceback.print_exc()
            first = (str(error).splitlines() or [""])[0][:300]
            line = {"layout": label, "ok": False, "error": f"{type(error).__name__}: {first}"}
        line.update(
            device=device,
            device_name=torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
            dtype=dtype,
            attention="flex" if device.startswith("cuda") and "padding_free" in name else "sdpa",
            rows=len(rows),
            tokens=int(batches[name]["input_ids"].numel()),
            padded_tokens=int(batches["padded"]["input_ids"].numel()),
            torch=torch.__version__,
        )
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--checkpointing", default="on", choices=["on", "off"])
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()
    lines = check(args.device, args.dtype, args.layers, args.checkpointing == "on", args.tolerance)
    out = os.environ.get("OUT")
    for line in lines:
        print(json.dumps(line), flush=True)
        if out:
            with open(Path(out) / "padding_free_check.jsonl", "a", encoding="utf-8") as file:
                file.write(json.dumps(line) + "\n")
    if not all(line["ok"] for line in lines):
        print("padding_free_check: a layout differs from the padded one", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
