"""`lexrl train`, a kill -9 and resume, `lexrl eval`, and a Qwen3-4B-shaped run against
`lexrl plan`: what a user launching on CUDA would exercise first, as one prepared command.

    bash scripts/gpu_train_check.sh               # on a lent GPU, wheels carried (see the .sh)
    python scripts/gpu_train_check.py --cpu --out DIR   # tiny shapes on the CPU: what CI runs

Every step runs the `lexrl` command line in its own process, as a user would, in OUT/work:

1. `resume`: the statute demo (configs/demo_cpu.yaml; bf16 where the GPU has it) trained
   uninterrupted (run a1) and once killed with SIGKILL as soon as its first checkpoint is on
   disk, then rerun with `--run.resume true` (run b). The check compares b's final adapter with
   a1's. On the CPU every run is bit-identical, so b must equal a1 exactly. On CUDA kernels such
   as the flash-attention backward add in a nondeterministic order, so a second uninterrupted
   run (a2) measures how far two runs drift apart, and the resumed run passes when it differs
   from a1 by no more than twice what a2 does (relative L2 distance of all LoRA weights), or not
   at all. (That a build of the tiny model and its warm-start in an empty cache repeats bit for
   bit is checked by tests/train/test_warmstart_resume.py.)
2. `eval`: `lexrl eval` of run b's final checkpoint; its summary.
3. `design`: a random model of Qwen3-4B's shapes (scripts/build_random_model.py; on the CPU a
   2-layer miniature) trained 2 steps by `lexrl train` with `rollout.max_new_tokens` 200 and
   checkpointing, then `lexrl plan` of the same config at the token counts the run trained
   (turns x mean prompt + completion per trajectory, from its `perf/` metrics). A random model
   never writes a valid action nor the end token, so every episode runs the env's
   `max_iterations` calls of its own prompts plus 200 generated tokens (4 x (about 230 + 200)
   in the demo world), not the design workload's 4 x (1,500 + 200); the row says which.

One JSON line per check goes to stdout and to OUT/gpu_train_check.jsonl (the device tool
returns OUT), the commands' logs to OUT/logs/. `--deadline-s` skips what would start after it.
Exit 0 when every check that ran passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo_cpu.yaml"


@dataclass(frozen=True)
class Sizes:
    """How much each check runs: the GPU's sizes, or the CPU's miniature of them."""

    steps: int
    save_every: int
    demo: list[str]
    """Overrides of the demo config for the `resume` runs."""
    eval_tasks: int
    random_model: list[str]
    """Arguments of scripts/build_random_model.py beyond `--out`."""
    design: list[str] = field(default_factory=list)
    """Overrides for the `design` run."""
    repeat: bool = False
    """Run a2, a second uninterrupted run, whose distance from a1 bounds the resumed run's: on
    CUDA, where two runs differ. On the CPU they are bit-identical and the resumed run is held
    to exact equality instead, without the cost of a run."""


CUDA = Sizes(
    steps=6,
    save_every=3,
    demo=["--model.dtype", "bfloat16"],
    eval_tasks=60,
    random_model=["--dtype", "bfloat16"],
    design=["--model.dtype", "bfloat16", "--rollout.max_new_tokens", "200"],
    repeat=True,
)
CPU = Sizes(
    steps=3,
    save_every=1,
    demo=[
        "--warmstart.num_episodes", "300",
        "--env.max_iterations", "2",
        "--grpo.tasks_per_step", "2",
        "--grpo.num_generations", "4",
    ],
    eval_tasks=4,
    random_model=[
        "--dtype", "float32", "--layers", "2", "--hidden", "64", "--intermediate", "128",
        "--heads", "4", "--kv-heads", "2",
    ],
    design=[
        "--model.dtype", "float32",
        "--rollout.max_new_tokens", "16",
        "--env.max_iterations", "2",
        "--grpo.tasks_per_step", "1",
        "--grpo.num_generations", "2",
    ],
)  # fmt: skip

COMMON = [
    "--logging.wandb_mode", "disabled",
    "--run.eval_before", "false",
    "--run.eval_after", "false",
]  # fmt: skip


class Work:
    """The check's folders and its one way of running a `lexrl` command."""

    def __init__(self, out: Path, deadline: float, cache: Path | None) -> None:
        self.out, self.deadline = out, deadline
        self.work = out / "work"
        self.cache = cache or self.work / "cache"
        self.logs = out / "logs"
        self.work.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    def start(self, name: str, *args: str) -> subprocess.Popen:
        command = [sys.executable, "-m", "lexrl.cli", *args]
        with (self.logs / f"{name}.log").open("a") as log:
            log.write(" ".join(command) + "\n")
            log.flush()
            return subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT,
                start_new_session=True,
            )  # fmt: skip

    def run(self, name: str, *args: str) -> None:
        code = self.start(name, *args).wait()
        if code != 0:
            tail = (self.logs / f"{name}.log").read_text()[-2000:]
            raise RuntimeError(f"`lexrl {args[0]}` ({name}) exited {code}:\n{tail}")

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


def lora_weights(run: Path, step: int) -> dict:
    from safetensors.torch import load_file

    adapter = run / "checkpoints" / f"step-{step:06d}" / "adapter" / "adapter_model.safetensors"
    return load_file(str(adapter))


def relative_distance(a: dict, b: dict) -> float:
    """||a - b|| / ||a|| over every LoRA tensor, in float64."""
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    difference = sum(float((a[k].double() - b[k].double()).pow(2).sum()) for k in a)
    norm = sum(float(a[k].double().pow(2).sum()) for k in a)
    return (difference / norm) ** 0.5 if norm else float(difference > 0)


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]


def kill_after_first_checkpoint(work: Work, config: list[str], run: Path, first: int) -> int:
    """Start run b, SIGKILL its process group once checkpoint `first` is on disk (checkpoints
    appear by an atomic rename, so a visible one is whole); the last step it had logged."""
    process = work.start("b", *config, "--run.output_dir", str(run))
    checkpoint = run / "checkpoints" / f"step-{first:06d}"
    while not checkpoint.is_dir():
        if process.poll() is not None:
            raise RuntimeError(f"run b exited {process.returncode} before its first checkpoint")
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return max(record["step"] for record in metrics(run))


def check_resume(work: Work, sizes: Sizes) -> dict:
    config = ["train", str(DEMO), *sizes.demo, *COMMON, "--run.max_steps", str(sizes.steps)]
    config += ["--run.save_every", str(sizes.save_every)]
    runs = {name: work.work / name for name in ("a1", "a2", "b")}
    config += ["--model.cache_dir", str(work.cache)]
    started = time.monotonic()
    work.run("a1", *config, "--run.output_dir", str(runs["a1"]))
    seconds_per_run = time.monotonic() - started
    if sizes.repeat:
        work.run("a2", *config, "--run.output_dir", str(runs["a2"]))
    killed_at = kill_after_first_checkpoint(work, config, runs["b"], sizes.save_every)
    work.run("b", *config, "--run.output_dir", str(runs["b"]), "--run.resume", "true")
    a1, b = (lora_weights(runs[name], sizes.steps) for name in ("a1", "b"))
    a2 = lora_weights(runs["a2"], sizes.steps) if sizes.repeat else a1
    run_to_run, resumed = relative_distance(a1, a2), relative_distance(a1, b)
    steps = metrics(runs["a1"])
    # Nothing trained would make every adapter equal and the comparison empty.
    trained = any(r["loss/grad_norm"] > 0 for r in steps)
    return {
        "check": "resume",
        "steps": sizes.steps,
        "checkpoints_at": list(range(sizes.save_every, sizes.steps + 1, sizes.save_every)),
        "killed_after_step": killed_at,
        "trained": trained,
        "rewards_a1": [round(r["reward/total"], 4) for r in steps],
        "rewards_b": [round(r["reward/total"], 4) for r in metrics(runs["b"])],
        "a2_vs_a1": run_to_run if sizes.repeat else None,
        "b_vs_a1": resumed,
        "seconds_per_run": round(seconds_per_run, 1),
        "step_s": [round(r["perf/step_s"], 2) for r in steps],
        "passed": killed_at < sizes.steps and resumed <= 2 * run_to_run and trained,
    }


def check_eval(work: Work, sizes: Sizes) -> dict:
    out = work.work / "eval"
    checkpoint = work.work / "b" / "checkpoints" / f"step-{sizes.steps:06d}"
    work.run(
        "eval", "eval", str(DEMO), *sizes.demo, "--logging.wandb_mode", "disabled",
        "--model.cache_dir", str(work.cache), "--eval.max_tasks", str(sizes.eval_tasks),
        "--run.output_dir", str(out), "--checkpoint", str(checkpoint),
    )  # fmt: skip
    path = next(out.rglob("eval_*_report.json"), None)
    if path is None:
        raise RuntimeError(f"`lexrl eval` wrote no eval_*_report.json under {out}")
    report = json.loads(path.read_text())
    return {
        "check": "eval",
        "report": str(path.relative_to(work.out)),
        "tasks": report["tasks"],
        "headline_metric": report["headline_metric"],
        "summary": report["summary"],
        "intervals": report["intervals"],
        "passed": report["tasks"] == sizes.eval_tasks and report["system"] == str(checkpoint),
    }


def trained_shape(record: dict, new_tokens: int) -> tuple[int, int, int]:
    """(turns per trajectory, mean prompt tokens, completion tokens) of one step's update."""
    rows, trajectories = record["perf/update_rows"], record["count/episodes"]
    prompt = (record["perf/update_tokens"] - record["perf/tokens_generated"]) / rows
    return round(rows / trajectories), round(prompt), new_tokens


def check_design(work: Work, sizes: Sizes, gpu: str) -> dict:
    model = work.work / "random-qwen3-4b"
    build = [sys.executable, str(ROOT / "scripts" / "build_random_model.py"), "--out", str(model)]
    with (work.logs / "build_random_model.log").open("w") as log:
        subprocess.run([*build, *sizes.random_model], stdout=log, stderr=subprocess.STDOUT,
                       check=True, env=work.env, cwd=ROOT)  # fmt: skip
    run = work.work / "design"
    config = [str(DEMO), "--model.name_or_path", str(model), "--warmstart.enabled", "false"]
    config += [*sizes.design, "--grpo.loss", "reinforce", "--grpo.gradient_checkpointing", "true"]
    work.run("design", "train", *config, *COMMON, "--run.max_steps", "2",
             "--run.output_dir", str(run))  # fmt: skip
    records = metrics(run)
    new_tokens = int(sizes.design[sizes.design.index("--rollout.max_new_tokens") + 1])
    turns, prompt, completion = trained_shape(records[-1], new_tokens)
    plan_out = work.logs / "plan.log"
    with plan_out.open("w") as log:
        plan = subprocess.run(
            [sys.executable, "-m", "lexrl.cli", "plan", *config, "--gpu", gpu,
             "--tokens", f"{turns}x{prompt}+{completion}", "--json"],
            stdout=subprocess.PIPE, stderr=log, text=True, env=work.env, cwd=ROOT, check=True,
        )  # fmt: skip
    predicted = json.loads(plan.stdout.strip().splitlines()[-1])[0]
    last = records[-1]
    return {
        "check": "design",
        "lengths": f"{turns}x{prompt}+{completion} per trajectory (the demo env's prompts, not "
        "the design workload's 4x1500+200)",
        "measured": {
            key.removeprefix("perf/"): round(value, 3)
            for key, value in last.items()
            if key.startswith("perf/")
        },
        "plan": {"gpu": gpu, "gib": predicted["trainer_gib"], "seconds": predicted["seconds"]},
        "passed": all(r["perf/update_tokens"] > 0 for r in records),
    }


def gpu_name() -> str:
    """The GPU kind `lexrl plan` predicts for: this device's, as scripts/gpu_bench.py names it
    (an H100 on the CPU, for the CPU mode's plan)."""
    import torch
    from gpu_bench import gpu_key

    return gpu_key(torch.cuda.get_device_name()) if torch.cuda.is_available() else "h100"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_train_check")))
    parser.add_argument("--cpu", action="store_true", help="tiny shapes on the CPU (CI)")
    parser.add_argument("--deadline-s", type=float, default=450)
    parser.add_argument(
        "--cache-dir", type=Path, help="model.cache_dir of every run (default OUT/work/cache)"
    )
    args = parser.parse_args()
    import torch

    if not args.cpu and not torch.cuda.is_available():
        parser.error("no CUDA device: pass --cpu for the CPU check")
    sizes = CPU if args.cpu else CUDA
    if args.cpu:
        # The trainer picks CUDA whenever it sees one; the CPU check must not.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    work = Work(args.out, time.monotonic() + args.deadline_s, args.cache_dir)
    checks = [
        ("resume", lambda: check_resume(work, sizes)),
        ("eval", lambda: check_eval(work, sizes)),
        ("design", lambda: check_design(work, sizes, gpu_name())),
    ]
    passed = True
    for name, check in checks:
        if work.time_left() <= 0:
            result = {"check": name, "skipped": f"past --deadline-s {args.deadline_s:g}"}
        else:
            started = time.monotonic()
            try:
                result = check()
            except (RuntimeError, subprocess.CalledProcessError) as error:
                result = {"check": name, "passed": False, "error": str(error)[-3000:]}
            result["seconds"] = round(time.monotonic() - started, 1)
        passed &= result.get("passed", True)
        line = json.dumps(result)
        print(line, flush=True)
        with (args.out / "gpu_train_check.jsonl").open("a") as file:
            file.write(line + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
