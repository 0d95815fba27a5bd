"""Helpers for end-to-end tests: a tiny-budget config and the `lexrl` command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TINY_RUN = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 48
grpo:
  num_generations: 4
  tasks_per_step: 2
  loss: grpo
  learning_rate: 0.01
  micro_batch_size: 16
env:
  type: statute
  first_stage_k: 10
  final_k: 3
  mas_k: 6
  max_iterations: 2
# Enough warm-start for valid actions most of the time: groups whose rewards differ, so the
# updates (and the resume tests that compare them) are not all zero.
warmstart:
  enabled: true
  num_episodes: 300
  epochs: 2
eval:
  max_tasks: 4
  samples_per_task: 1
logging:
  wandb_mode: {wandb}
  samples_every: 1
run:
  output_dir: {out}
  max_steps: {steps}
  save_every: 1
  eval_before: {evals}
  eval_after: {evals}
"""


def write_config(
    path: Path, cache: str, out: Path, steps: int = 2, evals: bool = True, wandb: str = "disabled"
) -> Path:
    """The tiny run's config at `path`. W&B (offline) only where a test reads what it writes:
    starting its service costs each run seconds of the suite's two cores."""
    text = TINY_RUN.format(cache=cache, out=out, steps=steps, evals=str(evals).lower(), wandb=wandb)
    path.write_text(text)
    return path


ZERO2 = Path(__file__).parents[1] / "configs" / "accelerate" / "zero2_8gpu.yaml"


def accelerate_command(
    processes: int,
    *args: str,
    config_file: Path | None = None,
    machines: int = 1,
    machine_rank: int = 0,
    main_process: tuple[str, str] | None = None,
) -> list[str]:
    """`accelerate launch` of `args` (a script, or `-m module ...`) on CPU processes, fp32.
    `processes` counts those of all `machines`; with several, this is the command of machine
    `machine_rank`, which meets the others at `main_process` (ip, port)."""
    # `--cpu` would pick accelerate's MPI launcher; `--multi_gpu` starts torchrun, and on a machine
    # without CUDA the processes join a gloo process group on the CPU (it needs 2+ processes).
    if config_file is not None:
        launch = ["--config_file", str(config_file)]
    else:
        launch = ["--multi_gpu"] if processes > 1 else []
    if machines > 1:
        ip, port = main_process
        launch += [
            "--machine_rank", str(machine_rank), "--main_process_ip", ip,
            "--main_process_port", port, "--rdzv_backend", "static",
        ]  # fmt: skip
    return [
        sys.executable, "-m", "accelerate.commands.launch", *launch,
        "--num_processes", str(processes), "--num_machines", str(machines),
        "--mixed_precision", "no", "--dynamo_backend", "no", *args,
    ]  # fmt: skip


def lexrl_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "lexrl.cli", *args]


def run_lexrl(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_API_KEY": "", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        lexrl_command(*args), capture_output=True, text=True, timeout=timeout, env=env
    )
