"""One statute update of a random Qwen3-4B on one GPU (`hf` backend), measured beside the plan.

    python scripts/gpu_bench.py [--layers 36] [--device cuda] [--dtype auto] [--attn sdpa]
        [--tokens 4x1500+200] [--trajectories 16] [--checkpointing off,on]
        [--micro-batch-tokens 4096,8192] [--shared-prefix off] [--compile off]
        [--padding-free off] [--group-size 8]
        [--shared-fraction 0.5] [--warmup 1] [--steps 3] [--deadline-s 0]

On a GPU machine run it through scripts/gpu_bench.sh, which installs lexrl from wheels/ first.

The model is `Qwen3ForCausalLM` with random weights and Qwen3-4B's widths
(`lexrl.train.plan.QWEN3_4B`: hidden 2,560, MLP 9,728, 32 query and 8 KV heads of 128, a tied
151,936-token vocabulary) and `--layers` decoder layers, in `--dtype` on `--device` (`auto`: bf16
on a GPU, float32 on the CPU, where bf16 matmuls are slow without AVX-512 BF16), with the LoRA of
configs/stard_mas_grpo.yaml (r 16, alpha 32, every projection) and a `Learner` as `lexrl train`
builds it (`GRPOConfig(loss="reinforce", learning_rate=1e-5)`, one process). The update's rows
are one statute step's trainable turns: `--trajectories` trajectories of `--tokens`
TURNSxPROMPT+COMPLETION (default 16 x 4 turns of 1,500 + 200 tokens, the project's stated
workload: 64 rows), random ids, advantages +-1. As GRPO samples them, the trajectories come in
tasks of `--group-size` (K = 8), whose rows share the first call's whole prompt and the first
`--shared-fraction` of a later call's (the plan's assumption for `--tokens`,
`plan.assumed_shared_prefix`); the rest of each prompt is the row's own. `--shared-prefix on`
trains them with `grpo.shared_prefix` (lexrl/train/shared_prefix.py), `off` repeated: the same
rows either way. `--compile on` compiles each decoder layer (`grpo.compile_layers`); its
warm-up update holds the compilation, reported as `warmup_s`. `--padding-free on` lays each
micro-batch's rows (or packs) end to end without padding and attends with FlexAttention
(`grpo.padding_free`, lexrl/train/padding_free.py); the plan's numbers stay the padded layout's.

Each configuration of the grid (`--tokens` x `--checkpointing` x `--micro-batch-tokens` x
`--shared-prefix` x `--compile` x `--padding-free`) runs in its own process, so none inherits another's memory or an
OOM, and does `--warmup` updates, then `--steps` measured ones. Per configuration it reports:

- `update_peak_mib`: the largest over the measured updates of `torch.cuda.max_memory_allocated()`
  (reset just before the update) minus `torch.cuda.memory_allocated()` before it, i.e. what the
  update adds above the model, its LoRA and the optimizer's state. On the CPU: the peak
  resident memory (VmHWM, reset through /proc/self/clear_refs) minus the resident memory.
- `model_mib`: memory allocated by the model and its LoRA (before the learner), beside the
  plan's base weights (in `dtype`) + LoRA weights (`predicted_model_mib`).
- `update_s`: mean seconds of a measured update (synchronised), and `tokens_per_s`: trained
  tokens (prompt + completion, no padding) per second.
- `encoded_tokens`: the positions the update's forward passes hold, padding included (rows x
  longest row a micro-batch; with `--shared-prefix on`, packs x longest pack; with
  `--padding-free on`, the real tokens, each shared prefix once), and
  `prefix_share`: the share of trained tokens that are a prefix another row of the group holds
  (what sharing could save at most).
- `predicted_peak_mib`: `lexrl.train.plan.update_memory` for the largest micro-batch that
  `split_micro_batches` cuts (flash attention on a GPU, the CPU's attention on the CPU), with its
  parts (bf16 activations, whatever `dtype`); `predicted_update_s`:
  `lexrl.train.plan.update_seconds` on the GPU the device's name gives (H200, else H100; on the
  CPU the H100's numbers, meaningless but printed).
- `status`: `ok`, `oom` (with `error`: "OOM at ..."), `error` or `timeout`.

A Markdown table goes to stdout, then one JSON line per configuration; with `OUT` set (the GPU
tool returns what is written there) also `$OUT/gpu_bench.jsonl` (appended as each
configuration finishes) and `$OUT/gpu_bench.md`; `--json PATH` appends the lines to PATH too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

MIB = 2**20


def parse_tokens(text: str) -> tuple[int, int, int]:
    """`TxP+C` -> (turns a trajectory, prompt tokens, completion tokens)."""
    turns, rest = text.lower().split("x")
    prompt, completion = rest.split("+")
    counts = int(turns), int(prompt), int(completion)
    if min(counts) < 1:
        raise ValueError(f"--tokens {text!r}: every count must be >= 1")
    return counts


def parse_micro_batch_tokens(text: str) -> int | None:
    return None if text.lower() in ("none", "0", "") else int(text)


def model_shape(layers: int) -> Any:
    import dataclasses

    from lexrl.train.plan import QWEN3_4B

    return dataclasses.replace(QWEN3_4B, layers=layers)


def make_rows(
    trajectories: int, tokens: str, group_size: int = 8, shared_fraction: float = 0.5
) -> list[Any]:
    """One step's trainable turns: trajectory t belongs to task t // `group_size`, whose rows
    share the first call's whole prompt and the first `shared_fraction` of a later call's."""
    import torch

    from lexrl.train.advantages import Row

    turns, prompt, completion = parse_tokens(tokens)
    generator = torch.Generator().manual_seed(1)

    def ids(count: int) -> list[int]:
        return torch.randint(1, 150_000, (count,), generator=generator).tolist()

    prefixes = {}
    for task in range((trajectories + group_size - 1) // group_size):
        for turn in range(turns):
            prefixes[task, turn] = ids(prompt if turn == 0 else int(prompt * shared_fraction))
    rows = []
    for trajectory in range(trajectories):
        for turn in range(turns):
            prefix = prefixes[trajectory // group_size, turn]
            # A row's own part opens with a token no other row has, so the common prefix of a
            # group is exactly the shared part.
            own = []
            if len(prefix) < prompt:
                own = [150_000 + trajectory % 1_900, *ids(prompt - len(prefix) - 1)]
            rows.append(
                Row(
                    prefix + own,
                    ids(completion),
                    [-2.0] * completion,
                    1.0 if trajectory % 2 else -1.0,
                    1.0,
                    trajectory,
                    "planner",
                )
            )
    return rows


def resolve_dtype(dtype: str, device: str) -> str:
    """`--dtype`: `auto` is bfloat16 on a GPU, float32 on the CPU (whose bf16 matmuls crawl
    without AVX-512 BF16)."""
    if dtype != "auto":
        return dtype
    return "float32" if device == "cpu" else "bfloat16"


def significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def gpu_key(device_name: str) -> str:
    return "h200" if "h200" in device_name.lower() else "h100"


def encoded_tokens(chunk: list[Any], shared: bool, padding_free: bool = False) -> int:
    """Positions one micro-batch's forward holds, padding included: rows x (longest prompt +
    longest completion) as `pack_rows` lays them out, with `grpo.shared_prefix` packs x
    longest pack (`shared_prefix.packed_size`), with `grpo.padding_free` the one sequence's
    tokens (`padding_free.flat_size`)."""
    from lexrl.train.padding_free import NO_SHARING, flat_size
    from lexrl.train.shared_prefix import MIN_SHARED_TOKENS, packed_size

    if padding_free:
        return flat_size(chunk, MIN_SHARED_TOKENS if shared else NO_SHARING)
    if shared:
        return packed_size(chunk)
    widest_prompt = max(len(r.prompt_ids) for r in chunk)
    return len(chunk) * (widest_prompt + max(len(r.completion_ids) for r in chunk))


def plan_inputs(spec: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """The plan's model shape, token profile, run settings and one-GPU `hf` layout for one
    configuration (a spec or a line this script wrote)."""
    from lexrl.config import Config
    from lexrl.train.plan import Layout, TokenProfile, assumed_shared_prefix
    from lexrl.train.plan_report import run_settings

    shape = model_shape(spec["layers"])
    turns, prompt, completion = parse_tokens(spec["tokens"])
    trajectories = spec["trajectories"]
    config = Config()
    config.model.dtype = spec.get("dtype", "bfloat16")
    config.lora.r = 16
    config.grpo.micro_batch_size = spec["micro_batch_size"]
    config.grpo.micro_batch_tokens = spec["micro_batch_tokens"]
    config.grpo.gradient_checkpointing = spec["checkpointing"]
    config.grpo.shared_prefix = bool(spec.get("shared_prefix"))
    config.grpo.importance_sampling = "none"  # `auto` is none for the hf backend
    config.rollout.max_new_tokens = completion
    config.rollout.vllm_max_model_len = prompt + completion
    config.rollout.max_concurrent_episodes = config.rollout.max_batch_size = trajectories
    per_trajectory, row_share = assumed_shared_prefix(
        turns, prompt, spec.get("group_size", 8), spec.get("shared_fraction", 0.5)
    )
    profile = TokenProfile(
        [(prompt, completion)] * (turns * trajectories),
        trajectories,
        f"{trajectories} trajectories of {spec['tokens']}",
        shared_prefix_tokens=per_trajectory * trajectories,
        shared_row_share=row_share,
    )
    layout = Layout("hf, 1 GPU", 1, 1, "hf", trajectories_per_step=trajectories)
    return shape, profile, run_settings(config), layout


def plan(spec: dict[str, Any], rows: list[Any], device_name: str) -> dict[str, Any]:
    """What `lexrl.train.plan` predicts for this configuration: the largest micro-batch as the
    learner cuts it, its update memory by part, the model's own memory, and the update's time."""
    from lexrl.train.learner import split_micro_batches
    from lexrl.train.padding_free import split_padding_free_micro_batches
    from lexrl.train.plan import (
        ALL_PROJECTIONS,
        gpu_for,
        largest_micro_batch,
        largest_shared_micro_batch,
        update_memory,
        update_seconds,
    )
    from lexrl.train.shared_prefix import group_by_prefix, split_shared_micro_batches

    shape, profile, settings, layout = plan_inputs(spec)
    shared = bool(spec.get("shared_prefix"))
    padding_free = bool(spec.get("padding_free"))
    gpu = gpu_for(None, gpu_key(device_name))
    if padding_free:
        chunks = split_padding_free_micro_batches(
            rows, spec["micro_batch_size"], spec["micro_batch_tokens"], shared
        )
    else:
        split = split_shared_micro_batches if shared else split_micro_batches
        chunks = split(rows, spec["micro_batch_size"], spec["micro_batch_tokens"])
    sizes = [encoded_tokens(c, shared, padding_free) for c in chunks]
    largest = chunks[sizes.index(max(sizes))]
    completion_width = max(len(r.completion_ids) for r in largest)
    sequence = max(len(r.prompt_ids) for r in largest) + completion_width
    attention = "cpu" if spec["device"] == "cpu" else "flash"
    parts = update_memory(
        shape,
        len(largest),
        sequence,
        completion_width,
        lora_rank=16,
        checkpointing=spec["checkpointing"],
        attention=attention,
        chunk_tokens=512,
        shared_tokens=max(0, len(largest) * sequence - max(sizes)),
        grouped_attention=shared,
    )
    if shared:
        plan_rows, plan_sequence, plan_completion, _ = largest_shared_micro_batch(
            profile, settings, len(rows)
        )
    else:
        plan_rows, plan_sequence, plan_completion = largest_micro_batch(
            profile, settings, len(rows)
        )
    lora = shape.lora_params(16, list(ALL_PROJECTIONS))
    return {
        "micro_batches": len(chunks),
        "micro_batch": {"rows": len(largest), "sequence": sequence, "completion": completion_width},
        "plan_micro_batch": {
            "rows": plan_rows,
            "sequence": plan_sequence,
            "completion": plan_completion,
        },
        "encoded_tokens": sum(sizes),
        "prefix_share": round(group_by_prefix(rows)[1], 4),
        "plan_prefix_share": round(profile.shared_prefix_share or 0.0, 4),
        "plan_gpu": gpu.name,
        "plan_attention": attention,
        "predicted_model_mib": round((shape.params() * settings.dtype_bytes + lora * 4) / MIB, 1),
        "predicted_peak_mib": round(parts["total"] / MIB, 1),
        "predicted_parts_mib": {k: round(v / MIB, 1) for k, v in parts.items() if k != "total"},
        "predicted_update_s": significant(update_seconds(shape, profile, settings, layout, gpu)),
    }


class Meter:
    """Allocated memory and its peak: the CUDA allocator's counters, or on the CPU the process's
    resident memory and its high-water mark."""

    def __init__(self, device: str):
        import torch

        self.cuda = device != "cpu"
        self.torch = torch
        self.source = "torch.cuda.max_memory_allocated" if self.cuda else "VmHWM - VmRSS"

    def _status(self, field: str) -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"{field} not in /proc/self/status")

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def allocated(self) -> int:
        self.sync()
        return self.torch.cuda.memory_allocated() if self.cuda else self._status("VmRSS")

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats()
        else:
            Path("/proc/self/clear_refs").write_text("5")

    def peak(self) -> int:
        self.sync()
        return self.torch.cuda.max_memory_allocated() if self.cuda else self._status("VmHWM")


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Build the model and learner of `spec` and time its updates (run in a child process)."""
    import torch

    device = spec["device"]
    device_name = torch.cuda.get_device_name() if device != "cpu" else "cpu"
    rows = make_rows(
        spec["trajectories"],
        spec["tokens"],
        spec.get("group_size", 8),
        spec.get("shared_fraction", 0.5),
    )
    result: dict[str, Any] = {**spec, "device_name": device_name, "rows": len(rows)}
    result.update(plan(spec, rows, device_name))
    result["trained_tokens"] = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
    meter = Meter(device)
    result["memory_source"] = meter.source
    stage = "model build"
    try:
        from accelerate import Accelerator
        from transformers import Qwen3Config, Qwen3ForCausalLM

        from lexrl.config import GRPOConfig, LoraConfig
        from lexrl.models import add_lora
        from lexrl.train.learner import Learner

        torch.manual_seed(0)
        shape = model_shape(spec["layers"])
        config = Qwen3Config(
            hidden_size=shape.hidden,
            intermediate_size=shape.intermediate,
            num_attention_heads=shape.heads,
            num_key_value_heads=shape.kv_heads,
            head_dim=shape.head_dim,
            vocab_size=shape.vocab,
            tie_word_embeddings=shape.tied,
            num_hidden_layers=spec["layers"],
            max_position_embeddings=max(8192, result["micro_batch"]["sequence"]),
        )
        baseline = meter.allocated()
        started = time.perf_counter()
        # Built on the device: a random 4B model initialised on the CPU takes minutes.
        with torch.device(device):
            model = Qwen3ForCausalLM._from_config(
                config,
                dtype=getattr(torch, spec.get("dtype", "bfloat16")),
                attn_implementation=spec["attn"],
            )
        model.to(device)
        policy = add_lora(model, LoraConfig(r=16, alpha=32), seed=0)
        result["model_mib"] = round((meter.allocated() - baseline) / MIB, 1)
        result["build_s"] = round(time.perf_counter() - started, 2)
        stage = "learner"
        grpo = GRPOConfig(
            loss="reinforce",
            micro_batch_size=spec["micro_batch_size"],
            micro_batch_tokens=spec["micro_batch_tokens"],
            gradient_checkpointing=spec["checkpointing"],
            shared_prefix=bool(spec.get("shared_prefix")),
            compile_layers=bool(spec.get("compile")),
            padding_free=bool(spec.get("padding_free")),
            learning_rate=1e-5,
        )
        accelerator = Accelerator(cpu=device == "cpu")
        learner = Learner(policy, grpo, 10, accelerator, pad_id=0)
        seconds, peaks, warmups = [], [], []
        for step in range(spec["warmup"] + spec["steps"]):
            warm = step < spec["warmup"]
            stage = f"update {step + 1} ({'warm-up' if warm else 'measured'})"
            before = meter.allocated()
            meter.reset_peak()
            started = time.perf_counter()
            metrics = learner.update(rows)
            meter.sync()
            elapsed = time.perf_counter() - started
            peak = meter.peak() - before
            print(
                f"  {stage}: {elapsed:.2f} s, peak +{peak / MIB:,.0f} MiB, "
                f"loss {metrics['loss/policy']:.4g}",
                file=sys.stderr,
                flush=True,
            )
            if warm:
                warmups.append(elapsed)
            else:
                seconds.append(elapsed)
                peaks.append(peak)
        result["optimizer_mib"] = round(
            (meter.allocated() - baseline) / MIB - result["model_mib"], 1
        )
        result["update_s_steps"] = [round(s, 3) for s in seconds]
        result["warmup_s"] = [round(s, 3) for s in warmups]
        result["update_peak_mib_steps"] = [round(p / MIB, 1) for p in peaks]
        if seconds:
            mean = sum(seconds) / len(seconds)
            result["update_s"] = round(mean, 3)
            result["tokens_per_s"] = round(result["trained_tokens"] / mean, 1)
            result["update_peak_mib"] = round(max(peaks) / MIB, 1)
            result["memory_ratio"] = round(
                result["predicted_peak_mib"] / result["update_peak_mib"], 3
            )
            result["time_ratio"] = significant(result["predicted_update_s"] / mean)
        result["status"] = "ok"
    except torch.OutOfMemoryError as error:
        result["status"] = "oom"
        result["error"] = f"OOM at {stage}: {str(error).splitlines()[0][:300]}"
    except Exception as error:  # noqa: BLE001 - reported as the configuration's row
        traceback.print_exc()
        result["status"] = "error"
        result["error"] = f"{type(error).__name__} at {stage}: {str(error).splitlines()[0][:300]}"
    if device != "cpu":
        result["max_reserved_mib"] = round(torch.cuda.max_memory_reserved() / MIB, 1)
        result["device_total_mib"] = round(torch.cuda.get_device_properties(0).total_memory / MIB)
    return result


def versions() -> dict[str, str]:
    import importlib.metadata

    found = {}
    for name in ("torch", "transformers", "peft", "accelerate", "lexrl"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
    import lexrl

    found["lexrl_path"] = str(Path(lexrl.__file__).parent)
    return found


def number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def gib(mib: float | None) -> str:
    return "-" if mib is None else f"{mib / 1024:,.2f}"


def table_row(r: dict[str, Any]) -> str:
    batch = r.get("micro_batch", {})
    shape = (
        f"{r.get('micro_batches', '?')} x ({batch.get('rows', '?')} x {batch.get('sequence', '?')})"
    )
    status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('error', '')}"
    ratio = r.get("memory_ratio")
    time_ratio = r.get("time_ratio")
    return (
        f"| {r['tokens']} | {'on' if r.get('shared_prefix') else 'off'} "
        f"| {'on' if r.get('compile') else 'off'} "
        f"| {'on' if r.get('padding_free') else 'off'} "
        f"| {number(r.get('encoded_tokens'), ',')} "
        f"| {r['layers']} | {'on' if r['checkpointing'] else 'off'} "
        f"| {r['micro_batch_tokens'] or '-'} | {shape} "
        f"| {gib(r.get('model_mib'))} / {gib(r.get('predicted_model_mib'))} "
        f"| {gib(r.get('update_peak_mib'))} | {gib(r.get('predicted_peak_mib'))} "
        f"| {number(ratio, '.2f')} "
        f"| {number(r.get('update_s'), '.2f')} | {number(r.get('predicted_update_s'), '.3g')} "
        f"| {number(time_ratio, '.3g')} "
        f"| {number(r.get('tokens_per_s'), ',.0f')} | {status} |"
    )


TABLE_HEAD = (
    "| tokens | shared prefix | compiled layers | padding-free | encoded tokens | layers "
    "| checkpointing | micro-batch tokens "
    "| micro-batches x (rows x sequence) "
    "| model GiB measured / plan | update peak GiB measured | plan | plan / measured "
    "| update s measured | plan s | plan / measured | tokens/s | status |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def run_child(spec: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    env = dict(os.environ)
    if spec["device"] == "cpu":
        # Freed tensors go back to the system at once, so the resident peak is that of live
        # tensors (scripts/bench_update_memory.py).
        env.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {**spec, "status": "timeout", "error": f"no result within {timeout:.0f} s"}
    lines = [line for line in out.stdout.strip().splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        return {**spec, "status": "error", "error": f"child exited {out.returncode}"}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "bfloat16", "float32"),
        help="the base model's dtype; auto: bfloat16 on a GPU, float32 on the CPU",
    )
    parser.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager, ...)")
    parser.add_argument("--tokens", default="4x1500+200", help="list of TURNSxPROMPT+COMPLETION")
    parser.add_argument("--trajectories", type=int, default=16)
    parser.add_argument("--checkpointing", default="off,on")
    parser.add_argument("--micro-batch-tokens", default="4096,8192", help="list; none: rows")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="rows when tokens none")
    parser.add_argument("--shared-prefix", default="off", help="list of off, on")
    parser.add_argument("--compile", default="off", help="list of off, on: grpo.compile_layers")
    parser.add_argument("--padding-free", default="off", help="list of off, on: grpo.padding_free")
    parser.add_argument("--group-size", type=int, default=8, help="K trajectories a task")
    parser.add_argument(
        "--shared-fraction",
        type=float,
        default=0.5,
        help="share of a later call's prompt that a task's rows have in common",
    )
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=0,
        help="stop starting configurations, and kill a running one, after this many seconds "
        "(0: none); what finished is still reported",
    )
    parser.add_argument("--json", help="also append one JSON line per configuration here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(json.loads(args.child))), flush=True)
        return
    for tokens in args.tokens.split(","):
        parse_tokens(tokens.strip())
    dtype = resolve_dtype(args.dtype, args.device)
    started = time.monotonic()
    info = versions()
    print(f"versions: {json.dumps(info)}", file=sys.stderr, flush=True)
    out_dir = os.environ.get("OUT")
    sinks = [Path(p) for p in (args.json, out_dir and Path(out_dir) / "gpu_bench.jsonl") if p]
    results = []
    grid = itertools.product(
        args.tokens.split(","),
        args.checkpointing.split(","),
        args.micro_batch_tokens.split(","),
        args.shared_prefix.split(","),
        args.compile.split(","),
        args.padding_free.split(","),
    )
    for tokens, mode, budget, shared, compiled, padding_free in grid:
        spec = {
            "layers": args.layers,
            "device": args.device,
            "dtype": dtype,
            "attn": args.attn,
            "tokens": tokens.strip(),
            "trajectories": args.trajectories,
            "group_size": args.group_size,
            "shared_fraction": args.shared_fraction,
            "checkpointing": mode.strip() == "on",
            "micro_batch_tokens": parse_micro_batch_tokens(budget.strip()),
            "micro_batch_size": args.micro_batch_size,
            "shared_prefix": shared.strip() == "on",
            "compile": compiled.strip() == "on",
            "padding_free": padding_free.strip() == "on",
            "warmup": args.warmup,
            "steps": args.steps,
        }
        timeout = None
        if args.deadline_s:
            timeout = args.deadline_s - (time.monotonic() - started)
            if timeout < 5:
                result = {**spec, "status": "timeout", "error": "deadline passed before start"}
                timeout = -1.0
        print(
            f"configuration: {tokens}, checkpointing {mode}, micro-batch tokens {budget}, "
            f"shared prefix {shared}, compiled layers {compiled}, padding-free {padding_free}",
            file=sys.stderr,
            flush=True,
        )
        if timeout is None or timeout > 0:
            result = run_child(spec, timeout)
        result["versions"] = info
        results.append(result)
        for sink in sinks:
            with open(sink, "a", encoding="utf-8") as file:
                file.write(json.dumps(result) + "\n")
    table = "\n".join([TABLE_HEAD, *(table_row(r) for r in results)])
    print(table)
    for result in results:
        print(json.dumps(result))
    if out_dir:
        (Path(out_dir) / "gpu_bench.md").write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
