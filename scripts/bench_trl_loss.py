"""Peak memory and tokens/s of one GRPO update: lexrl's `Learner` vs TRL 1.16's loss path.

    python scripts/bench_trl_loss.py [--layers 2] [--shape 4x1000+256] [--checkpointing off,on]
        [--systems lexrl,trl] [--repeats 1] [--dtype bfloat16] [--json results.jsonl]

Both systems train the same random model on the same rows: `Qwen3ForCausalLM` with
Qwen3-4B's widths (`QWEN3_4B` of scripts/bench_update_memory.py) and `--layers` decoder
layers, in bf16 on the CPU (`--dtype float32` for a CPU without AVX-512, where bf16 matmuls
run up to 100x slower: the test suite's smoke run uses it), with lexrl's LoRA
(`lexrl.models.add_lora`, r 16 / alpha 32 on every projection, seed 0). A shape `RxP+T` is R rows of P prompt and T completion tokens, the
same seeded random ids for both, no padding, advantages alternating -1 / +1, one micro-batch.

- `lexrl`: `lexrl.train.learner.Learner(...).update(rows)` with `GRPOConfig(loss="grpo",
  micro_batch_size=R, learning_rate=1e-5)`: one decoder forward, the completion positions'
  hidden states projected to the vocabulary 512 at a time in checkpointed chunks
  (`completion_logprobs`), the PPO-clipped loss, backward, gradient clipping, AdamW, scheduler.
- `trl`: a real `trl.GRPOTrainer` (loss_type "grpo", beta 0, num_generations 2,
  per_device_train_batch_size R, `use_cpu`, bf16 autocast off since the model is already bf16,
  optim "adamw_torch" like lexrl's `torch.optim.AdamW`) built around the same peft-wrapped model
  (passed as a `PeftModel`, so TRL adds no adapter of its own). Each update is what
  `transformers.Trainer`'s loop does for one micro-batch, with GRPO's own `compute_loss`:
  `trainer.compute_loss(model, inputs)` (-> `_compute_loss` -> `_get_per_token_logps_and_
  entropies` -> the model's forward patched by `trl.trainer.utils.add_fused_lm_head` ->
  `trl.kernels.chunked_logprob.ChunkedLogProbFunction`), `trainer.accelerator.backward`,
  `trainer._clip_grad_norm`, `trainer.optimizer.step()`, `trainer.lr_scheduler.step()`,
  `model.zero_grad()`. `trainer.training_step` is not called: it goes through GRPO's
  `_prepare_inputs`, which generates completions (and scores them with the reward functions)
  before it returns a batch; here `inputs` is the dict `_generate_and_score_completions` would
  have returned (prompt_ids / prompt_mask / completion_ids / completion_mask / advantages, no
  `old_per_token_logps`: on-policy, one iteration, so TRL takes its own log-probs, detached,
  as the ratio's denominator). Gradient checkpointing is switched on as `Trainer.train` does
  (`model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=...)`, non-reentrant,
  transformers 5's default, the same as lexrl's); GRPOTrainer's `__init__` has already called
  `enable_input_require_grads` for a peft model.

What differs between the two paths, and why it matters here:

- Positions scored. lexrl projects only the R x T positions that predict completion tokens.
  TRL's fused head does the same on CUDA / XPU with Triton ("compact"), but on any other device
  it scores every position, R x (P + T - 1), and zeroes the prompt ones afterwards (so that
  tile shapes do not change between batches and recompile on e.g. Neuron). On this CPU that is
  ~4.9x the vocabulary-projection work of lexrl for 1000+256 rows. `--systems trl-compact`
  measures TRL with only that decision switched to the CUDA one (`trl.trainer.utils._use_triton`
  answering True for the compact choice; the tiles are still folded by TRL's torch code): the
  GPU's amount of work through the CPU's kernels.
- Entropy. TRL always computes each position's entropy (`compute_entropy=True`; it feeds a
  logged metric; with `entropy_coef` 0 no gradient flows through it). lexrl computes none.
- Projection kernels. lexrl: [512, V] float32 logits per checkpointed chunk and
  `torch.log_softmax(...).gather(...)`, recomputed in the backward by autograd. TRL: bf16
  [4096, 32768] tiles into a preallocated buffer, folded into an online log-sum-exp in float32,
  and a hand-written backward that recomputes each tile and accumulates the gradient GEMMs in
  float32 (on the CPU each tile and weight slice is cast to float32 for that).
- The ratio's denominator. TRL's is its detached log-probs (ratio exactly 1). lexrl's is the
  rows' sampler log-probs, here -ln(V) (about what a random model gives, so the ratio is near 1
  and a fraction of tokens clips). The values differ; the [R, T] elementwise work is the same.
- Bookkeeping. TRL also logs metrics (`accelerator.gather`, `.item()` of masked means); lexrl
  computes its clip fraction and log-ratio metrics. Both are small next to the model.

Each (system, checkpointing) measurement runs in its own process, so none inherits another's
memory, and systems alternate (lexrl, trl, lexrl, trl, ... for `--repeats`) so that machine load
falls on both alike. Each reports:

- `measured_mb`: the peak resident memory (VmHWM, reset just before through
  /proc/self/clear_refs) of the first update minus the resident memory just before it, i.e.
  above the model, its LoRA, the trainer and the optimizer's empty state.
- `tokens_per_s`: R x (P + T) / seconds of a second update, after the first (the warm-up).

The table goes to stdout as Markdown, then the lexrl / TRL ratios (medians over repeats) of
peak memory (below 1: lexrl uses less) and of tokens/s (above 1: lexrl is faster), then one JSON
line with everything; `--json` appends that line to a file too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_update_memory import QWEN3_4B, parse_shape, rss_mb, run_child  # noqa: E402

SYSTEMS = ("lexrl", "trl", "trl-compact")


def build_policy(layers: int, dtype: str = "bfloat16") -> Any:
    """The random Qwen3-4B-wide model in `dtype` with lexrl's LoRA (a `PeftModel`)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from lexrl.config import LoraConfig
    from lexrl.models import add_lora

    torch.manual_seed(0)
    config = Qwen3Config(**QWEN3_4B, num_hidden_layers=layers, max_position_embeddings=8192)
    model = Qwen3ForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    return add_lora(model, LoraConfig(r=16, alpha=32), seed=0)


def make_rows(shape: str) -> tuple[list[list[int]], list[list[int]], list[float]]:
    """Seeded random prompt and completion ids and the advantages, the same for both systems."""
    import torch

    rows, prompt, completion = parse_shape(shape)
    generator = torch.Generator().manual_seed(1)
    prompts, completions = [], []
    for _ in range(rows):
        prompts.append(torch.randint(1, 150_000, (prompt,), generator=generator).tolist())
        completions.append(torch.randint(1, 150_000, (completion,), generator=generator).tolist())
    return prompts, completions, [1.0 if i % 2 else -1.0 for i in range(rows)]


def lexrl_update(policy: Any, shape: str, checkpointing: bool) -> Any:
    """A function that runs one `Learner.update` on the rows."""
    from accelerate import Accelerator

    from lexrl.config import GRPOConfig
    from lexrl.train.advantages import Row
    from lexrl.train.learner import Learner

    prompts, completions, advantages = make_rows(shape)
    rows = len(prompts)
    grpo = {"loss": "grpo", "micro_batch_size": rows, "learning_rate": 1e-5}
    if checkpointing:
        grpo["gradient_checkpointing"] = True
    learner = Learner(policy, GRPOConfig(**grpo), 10, Accelerator(cpu=True), pad_id=0)
    sampler_logprob = -math.log(QWEN3_4B["vocab_size"])
    batch = [
        Row(p, c, [sampler_logprob] * len(c), a, 1.0, i, "planner")
        for i, (p, c, a) in enumerate(zip(prompts, completions, advantages, strict=True))
    ]
    return lambda: learner.update(batch)


def tiny_tokenizer() -> Any:
    """A three-token tokenizer: GRPOTrainer needs a processing class with pad and eos tokens,
    and nothing here is tokenized."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="<unk>")),
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
    )


def trl_update(policy: Any, shape: str, checkpointing: bool, compact: bool, out_dir: str) -> Any:
    """A function that runs one update through a real `trl.GRPOTrainer`'s loss path."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    if compact:
        import trl.trainer.utils

        # Only `add_fused_lm_head`'s choice of positions reads this name; the kernel module has
        # its own `_use_triton` and keeps folding tiles with torch on the CPU.
        trl.trainer.utils._use_triton = lambda device: True
    prompts, completions, advantages = make_rows(shape)
    rows, _, completion = parse_shape(shape)
    args = GRPOConfig(
        output_dir=out_dir,
        loss_type="grpo",
        beta=0.0,
        num_generations=2,
        per_device_train_batch_size=rows,
        max_completion_length=completion,
        learning_rate=1e-5,
        lr_scheduler_type="cosine",
        optim="adamw_torch",
        gradient_checkpointing=checkpointing,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["x"] * rows}),
        processing_class=tiny_tokenizer(),
    )
    if checkpointing:
        # What `Trainer.train` does before its loop (GRPOTrainer's `__init__` does not).
        gc_kwargs = dict(args.gradient_checkpointing_kwargs or {})
        trainer.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gc_kwargs or None)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    model, trainer.optimizer = trainer.accelerator.prepare(trainer.model, trainer.optimizer)
    trainer.current_gradient_accumulation_steps = 1
    inputs = {
        "prompt_ids": torch.tensor(prompts),
        "prompt_mask": torch.ones(rows, len(prompts[0]), dtype=torch.long),
        "completion_ids": torch.tensor(completions),
        "completion_mask": torch.ones(rows, completion, dtype=torch.long),
        "advantages": torch.tensor(advantages),
    }

    def update() -> float:
        model.train()
        with trainer.compute_loss_context_manager():
            loss = trainer.compute_loss(model, inputs)
        trainer.accelerator.backward(loss)
        trainer._clip_grad_norm(model)
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
        model.zero_grad()
        return float(loss.detach())

    return update


def child(system: str, layers: int, shape: str, checkpointing: bool, dtype: str) -> dict:
    import torch

    policy = build_policy(layers, dtype)
    with tempfile.TemporaryDirectory() as out_dir:
        if system == "lexrl":
            update = lexrl_update(policy, shape, checkpointing)
        else:
            update = trl_update(policy, shape, checkpointing, system == "trl-compact", out_dir)
        before = rss_mb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        update()
        peak = rss_mb("VmHWM")
        started = time.perf_counter()
        update()
        seconds = time.perf_counter() - started
    rows, prompt, completion = parse_shape(shape)
    return {
        "system": system,
        "layers": layers,
        "shape": shape,
        "checkpointing": checkpointing,
        "dtype": dtype,
        "measured_mb": round(peak - before, 1),
        "model_mb": round(before, 1),
        "update_s": round(seconds, 2),
        "tokens_per_s": round(rows * (prompt + completion) / seconds, 1),
        "threads": torch.get_num_threads(),
    }


def run_system(system: str, layers: int, shape: str, checkpointing: bool, dtype: str) -> dict:
    spec = json.dumps([system, layers, shape, checkpointing, dtype])
    return run_child(__file__, spec, {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"})


def ratios(results: list[dict], modes: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Per checkpointing mode and per TRL variant: lexrl / variant of the medians of peak memory
    and of tokens/s over repeats."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode in modes:
        runs = [r for r in results if r["checkpointing"] == (mode == "on")]

        def median(system: str, key: str, runs: list[dict] = runs) -> float | None:
            values = [r[key] for r in runs if r["system"] == system]
            return statistics.median(values) if values else None

        lexrl_mb, lexrl_tps = median("lexrl", "measured_mb"), median("lexrl", "tokens_per_s")
        for other in SYSTEMS[1:]:
            other_mb, other_tps = median(other, "measured_mb"), median(other, "tokens_per_s")
            if None in (lexrl_mb, lexrl_tps, other_mb, other_tps):
                continue
            out.setdefault(mode, {})[other] = {
                "peak_memory": round(lexrl_mb / other_mb, 3),
                "tokens_per_s": round(lexrl_tps / other_tps, 3),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--shape", default="4x1000+256")
    parser.add_argument("--checkpointing", default="off,on")
    parser.add_argument("--systems", default="lexrl,trl", help=f"among {', '.join(SYSTEMS)}")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    parser.add_argument("--json", help="append the JSON line to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        system, layers, shape, checkpointing, dtype = json.loads(args.child)
        print(json.dumps(child(system, layers, shape, checkpointing, dtype)))
        return
    systems = args.systems.split(",")
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose among {SYSTEMS}")
    modes = args.checkpointing.split(",")
    print(f"{args.layers} layers of Qwen3-4B, {args.shape}, {args.dtype} on the CPU")
    print()
    print("| system | checkpointing | repeat | peak MB above model | update s | tokens/s |")
    print("|---|---|---|---|---|---|")
    results = []
    for repeat in range(args.repeats):
        for mode in modes:
            for system in systems:
                result = run_system(system, args.layers, args.shape, mode == "on", args.dtype)
                result["repeat"] = repeat
                results.append(result)
                print(
                    f"| {system} | {mode} | {repeat} | {result['measured_mb']:,.0f} "
                    f"| {result['update_s']:.1f} | {result['tokens_per_s']:,.0f} |",
                    flush=True,
                )
    summary = ratios(results, modes)
    print()
    print("| checkpointing | lexrl / | peak memory | tokens/s |")
    print("|---|---|---|---|")
    for mode, per_system in summary.items():
        for other, ratio in per_system.items():
            print(
                f"| {mode} | {other} | {ratio['peak_memory']:.2f} | {ratio['tokens_per_s']:.2f} |"
            )
    print()
    import trl

    line = json.dumps(
        {
            "layers": args.layers,
            "shape": args.shape,
            "dtype": args.dtype,
            "trl": trl.__version__,
            "results": results,
            "ratios": summary,
        }
    )
    print(line)
    if args.json:
        with open(args.json, "a", encoding="utf-8") as file:
            file.write(line + "\n")


if __name__ == "__main__":
    main()
