"""Peak memory and speed of one `Learner.update`, measured, beside what `lexrl plan` predicts.

    python scripts/bench_update_memory.py [--layers 1,2,4] [--shapes 4x1000+256,2x256+64]
        [--checkpointing off,on] [--lexrl-root PATH] [--json results.jsonl] [--model tiny]

The model is random, with Qwen3-4B-Instruct's widths (hidden 2,560, MLP 9,728, 32 query and 8 KV
heads of 128, a tied 151,936-token vocabulary) and `--layers` decoder layers, in bf16 on the
CPU, with the LoRA of configs/stard_mas_grpo.yaml (r 16 on every projection). A shape
`RxP+T` is R rows of P prompt and T completion tokens, random ids, one micro-batch (the GRPO
loss, advantages +-1). Each measurement runs in its own process, so none inherits another's
memory, and reports:

- `measured_mb`: the peak resident memory (VmHWM, reset just before through
  /proc/self/clear_refs) of the update minus the resident memory before it, i.e. above the
  model, its LoRA and the optimizer's empty state. The first update is measured (what a run's
  first step costs); its one-time allocations are part of the number. The children run with
  `MALLOC_MMAP_THRESHOLD_=65536` (`--glibc-default` leaves glibc as it is): by default glibc
  raises its mmap threshold to the size of each large block freed (up to 32 MB), after which
  freed tensors stay in the heap and the resident memory counts tensors long gone (seen here:
  up to 1.7 GB more at the same update). A fixed threshold returns a freed tensor to the system
  at once, as a GPU's caching allocator makes it reusable, so the peak is that of live tensors.
- `predicted_mb`: `lexrl.train.plan.update_memory` for the same shape on the CPU (attention
  that keeps its score matrices), the sum of its activation, log-prob and LoRA-gradient parts.
- `tokens_per_s`: trained tokens (prompt + completion, padding excluded) per second of a second
  update, after the first.

`--lexrl-root` measures another checkout's `Learner` (e.g. the commit before the memory work:
`git worktree add /tmp/before <commit>`); `predicted_mb` is then still this checkout's plan.
The table goes to stdout as Markdown; `--json` appends one line per run. `--model tiny` swaps
Qwen3-4B's widths for a few-MB model of the same architecture (hidden 128, a 4,096-token
vocabulary), the same measurement in seconds: the CPU test runs it so (tests/scripts/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

QWEN3_4B = {
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}
TINY = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 4096,
    "tie_word_embeddings": True,
}
# The widths by `--model`; a saved run without a "model" is Qwen3-4B's.
MODELS = {"qwen3-4b": QWEN3_4B, "tiny": TINY}


def parse_shape(text: str) -> tuple[int, int, int]:
    rows, rest = text.split("x")
    prompt, completion = rest.split("+")
    return int(rows), int(prompt), int(completion)


def rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(
    layers: int,
    shape: str,
    checkpointing: bool,
    timed: bool = True,
    budget: int | None = None,
    model_name: str = "qwen3-4b",
) -> dict:
    import torch
    from accelerate import Accelerator
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from lexrl.config import GRPOConfig, LoraConfig
    from lexrl.models import add_lora
    from lexrl.train.advantages import Row
    from lexrl.train.learner import Learner

    torch.manual_seed(0)
    rows, prompt, completion = parse_shape(shape)
    widths = MODELS[model_name]
    config = Qwen3Config(**widths, num_hidden_layers=layers, max_position_embeddings=8192)
    model = Qwen3ForCausalLM._from_config(config, dtype=torch.bfloat16)
    policy = add_lora(model, LoraConfig(r=16, alpha=32), seed=0)
    grpo = {"loss": "grpo", "micro_batch_size": rows, "learning_rate": 1e-5}
    if checkpointing:
        grpo["gradient_checkpointing"] = True
    if budget:
        grpo["micro_batch_tokens"] = budget
    learner = Learner(policy, GRPOConfig(**grpo), 10, Accelerator(cpu=True), pad_id=0)
    generator = torch.Generator().manual_seed(1)
    high = min(150_000, widths["vocab_size"])
    batch = [
        Row(
            torch.randint(1, high, (prompt,), generator=generator).tolist(),
            torch.randint(1, high, (completion,), generator=generator).tolist(),
            [-2.0] * completion,
            1.0 if i % 2 else -1.0,
            1.0,
            i,
            "planner",
        )
        for i in range(rows)
    ]
    before = rss_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    learner.update(batch)
    peak = rss_mb("VmHWM")
    seconds = float("nan")
    if timed:
        started = time.perf_counter()
        learner.update(batch)
        seconds = time.perf_counter() - started
    return {
        "model": model_name,
        "layers": layers,
        "shape": shape,
        "checkpointing": checkpointing,
        "measured_mb": round(peak - before, 1),
        "model_mb": round(before, 1),
        "micro_batch_tokens": budget,
        "update_s": round(seconds, 2),
        "tokens_per_s": round(rows * (prompt + completion) / seconds, 1),
        "threads": torch.get_num_threads(),
    }


def predicted(
    layers: int,
    shape: str,
    checkpointing: bool,
    budget: int | None = None,
    model_name: str = "qwen3-4b",
) -> dict:
    from lexrl.train.plan import ModelShape, update_memory

    widths = MODELS[model_name]
    rows, prompt, completion = parse_shape(shape)
    if budget:
        # The largest micro-batch `split_micro_batches` makes of equal rows.
        rows = min(rows, max(1, budget // (prompt + completion)))
    model = ModelShape(
        layers=layers,
        hidden=widths["hidden_size"],
        intermediate=widths["intermediate_size"],
        heads=widths["num_attention_heads"],
        kv_heads=widths["num_key_value_heads"],
        head_dim=widths["head_dim"],
        vocab=widths["vocab_size"],
        tied=True,
    )
    parts = update_memory(
        model,
        rows=rows,
        sequence=prompt + completion,
        completion=completion,
        lora_rank=16,
        checkpointing=checkpointing,
        attention="cpu",
    )
    return {k: round(v / 2**20, 1) for k, v in parts.items()}


def run_child(script: str, spec: str, env: dict[str, str]) -> dict:
    """`script --child spec` in a fresh process; its last stdout line, a JSON object."""
    out = subprocess.run(
        [sys.executable, script, "--child", spec],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        print(out.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"run {spec} failed (exit {out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_header() -> None:
    print(
        "| layers | rows x prompt + completion | checkpointing | predicted MB | measured MB "
        "| predicted / measured | update s | tokens/s |"
    )
    print("|---|---|---|---|---|---|---|---|")


def budget_note(result: dict) -> str:
    budget = result.get("micro_batch_tokens")
    return f", micro-batches of <= {budget:,} tokens" if budget else ""


def print_row(result: dict) -> None:
    """Add this checkout's prediction to a measured `result` and print its row."""
    result["predicted"] = predicted(
        result["layers"],
        result["shape"],
        result["checkpointing"],
        result.get("micro_batch_tokens"),
        result.get("model", "qwen3-4b"),
    )
    total = result["predicted"]["total"]
    result["ratio"] = round(total / result["measured_mb"], 3)
    print(
        f"| {result['layers']} | {result['shape']}{budget_note(result)} "
        f"| {'on' if result['checkpointing'] else 'off'} "
        f"| {total:,.0f} | {result['measured_mb']:,.0f} | {result['ratio']:.2f} "
        f"| {result['update_s']:.1f} | {result['tokens_per_s']:,.0f} |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="1,2,4")
    parser.add_argument("--shapes", default="2x256+64,2x1024+256,4x1000+256")
    parser.add_argument("--checkpointing", default="off,on")
    parser.add_argument("--lexrl-root", help="measure the lexrl package of this checkout")
    parser.add_argument("--json", help="append one JSON line per run to this file")
    parser.add_argument(
        "--no-time", action="store_true", help="measure memory only (one update, not two)"
    )
    parser.add_argument(
        "--micro-batch-tokens",
        type=int,
        help="grpo.micro_batch_tokens (default: the shape's rows in one micro-batch)",
    )
    parser.add_argument(
        "--glibc-default", action="store_true", help="keep glibc's dynamic mmap threshold"
    )
    parser.add_argument(
        "--from-json", help="print the table of these saved runs with this checkout's plan"
    )
    parser.add_argument(
        "--model",
        default="qwen3-4b",
        choices=sorted(MODELS),
        help="the random model's widths (tiny: a few MB, for a quick check on a CPU)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.from_json:
        print_header()
        for line in Path(args.from_json).read_text().splitlines():
            print_row(json.loads(line))
        return
    if args.child:
        print(json.dumps(child(*json.loads(args.child))))
        return
    env = dict(os.environ)
    if not args.glibc_default:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    if args.lexrl_root:
        env["PYTHONPATH"] = os.pathsep.join([args.lexrl_root, env.get("PYTHONPATH", "")])
    print(f"model: {args.model}, random weights, bf16 on the CPU")
    print_header()
    for layers in [int(n) for n in args.layers.split(",")]:
        for shape in args.shapes.split(","):
            for mode in args.checkpointing.split(","):
                checkpointing = mode == "on"
                spec = json.dumps(
                    [
                        layers,
                        shape,
                        checkpointing,
                        not args.no_time,
                        args.micro_batch_tokens,
                        args.model,
                    ]
                )
                result = run_child(__file__, spec, env)
                print_row(result)
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as file:
                        file.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
