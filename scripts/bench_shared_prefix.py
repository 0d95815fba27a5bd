"""Time and peak memory of `Learner.update` with and without `grpo.shared_prefix`.

    python scripts/bench_shared_prefix.py                       # CPU, float32, 384 + 64 tokens
    python scripts/bench_shared_prefix.py --device cuda --dtype bfloat16 \\
        --prompt 1500 --completion 200 --layers 8 --hidden 2560 --vocab 151936

The rows are a GRPO step's first calls: `--tasks` tasks x `--k` trajectories, each task's rows
sharing one random `--prompt`-token prompt, then `--completion` sampled tokens of their own (the
design workload: 2 x 8 rows of 1,500 + 200). The model is random with Qwen3's shape (GQA with a
quarter of the query heads as KV heads, head 128 wide, MLP 3.8 x hidden, tied embeddings) at the
given width and depth, with the LoRA of configs/stard_mas_grpo.yaml (r 16 on every projection);
micro-batches of `--micro-batch-size` rows. Each mode runs in its own process so that neither
inherits the other's memory. It reports the first update's peak memory above the memory before
it (CPU: resident, VmHWM reset through /proc/self/clear_refs, Linux only; CUDA:
`torch.cuda.max_memory_allocated`), and the mean of `--repeats` later updates' times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def step_rows(args: argparse.Namespace) -> list:
    import torch

    from lexrl.train.advantages import Row

    generator = torch.Generator().manual_seed(1)
    rows = []
    for task in range(args.tasks):
        prompt = torch.randint(1, args.vocab, (args.prompt,), generator=generator).tolist()
        for k in range(args.k):
            completion = torch.randint(1, args.vocab, (args.completion,), generator=generator)
            rows.append(
                Row(
                    prompt,
                    completion.tolist(),
                    [-2.0] * args.completion,
                    1.0 if k % 2 else -1.0,
                    1.0,
                    task * args.k + k,
                    "planner",
                )
            )
    return rows


def measure(args: argparse.Namespace, shared: bool) -> dict:
    """One mode's numbers, in this process."""
    import torch
    from accelerate import Accelerator
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from lexrl.config import GRPOConfig, LoraConfig
    from lexrl.models import add_lora
    from lexrl.train.learner import Learner
    from lexrl.train.shared_prefix import group_by_prefix

    torch.manual_seed(0)
    device = torch.device(args.device)
    heads = args.hidden // 128
    config = Qwen3Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 38 // 10,
        num_hidden_layers=args.layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 4),
        head_dim=128,
        max_position_embeddings=args.prompt + args.k * args.completion + 8,
        tie_word_embeddings=True,
    )
    dtype = getattr(torch, args.dtype)
    model = Qwen3ForCausalLM._from_config(config, dtype=dtype).to(device)
    policy = add_lora(model, LoraConfig(r=16, alpha=32), seed=0)
    grpo = GRPOConfig(
        loss="grpo",
        learning_rate=1e-5,
        micro_batch_size=args.micro_batch_size,
        gradient_checkpointing=args.checkpointing,
        shared_prefix=shared,
    )
    accelerator = Accelerator(cpu=device.type == "cpu")
    learner = Learner(policy, grpo, 10, accelerator, pad_id=0)
    rows = step_rows(args)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated() / 2**20
    else:
        before = rss_mb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
    learner.update(rows)
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = rss_mb("VmHWM")
    seconds = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        learner.update(rows)
        if cuda:
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    return {
        "shared_prefix": shared,
        "peak_mb": round(peak - before, 1),
        "update_s": [round(s, 3) for s in seconds],
        "mean_s": round(sum(seconds) / len(seconds), 3),
        "saved_share": round(group_by_prefix(rows)[1], 3),
        "device": torch.cuda.get_device_name() if cuda else f"cpu x {torch.get_num_threads()}",
    }


def run_mode(args: argparse.Namespace, shared: bool) -> dict:
    """`measure` in a fresh process; its last stdout line is the JSON result."""
    command = [sys.executable, __file__, *sys.argv[1:], "--child", "shared" if shared else "off"]
    # A fixed mmap threshold returns freed tensors to the system at once, so the CPU's resident
    # peak is that of live tensors (see scripts/bench_update_memory.py).
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        print(out.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"shared_prefix={shared} failed (exit {out.returncode})")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=384)
    parser.add_argument("--completion", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=["off", "shared"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args, args.child == "shared")))
        return
    off, shared = run_mode(args, False), run_mode(args, True)
    print(
        f"{args.tasks} tasks x {args.k} rows of {args.prompt} + {args.completion} tokens, "
        f"hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}, {args.dtype} on "
        f"{off['device']}, micro-batches of {args.micro_batch_size} rows, checkpointing "
        f"{'on' if args.checkpointing else 'off'}; prefix copies are {shared['saved_share']:.0%} "
        "of the trained tokens"
    )
    print("| shared_prefix | update s (each) | mean s | peak MB above the model |")
    print("|---|---|---|---|")
    for result in (off, shared):
        each = ", ".join(f"{s:.2f}" for s in result["update_s"])
        print(
            f"| {'on' if result['shared_prefix'] else 'off'} | {each} | {result['mean_s']:.2f} "
            f"| {result['peak_mb']:,.0f} |"
        )
    print(
        f"shared / repeated: time {shared['mean_s'] / off['mean_s']:.2f}x, "
        f"peak memory {shared['peak_mb'] / max(off['peak_mb'], 1e-9):.2f}x"
    )


if __name__ == "__main__":
    main()
