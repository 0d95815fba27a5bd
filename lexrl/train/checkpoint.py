"""Atomic checkpoints: adapter, optimizer, scheduler, RNG of every process, step, data position.

A checkpoint is written into a hidden staging folder and renamed into `checkpoints/step-NNNNNN`
in one `os.replace`, so a run killed at any moment leaves only complete checkpoints behind.
A write that fails (a full disk) removes the staging folder and raises, naming the checkpoint and
the previous one, which is untouched: the run stops rather than train on without a checkpoint.
Under DeepSpeed ZeRO each process holds a partition of the optimizer state (and of the fp32
master weights), so each writes its own `optimizer-<rank>.pt`.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from peft import PeftModel, set_peft_model_state_dict
from safetensors.torch import load_file

from lexrl.train.learner import uses_deepspeed

STATE_FILE = "trainer_state.json"


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / "checkpoints" / f"step-{step:06d}"


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    folder = Path(output_dir) / "checkpoints"
    done = (
        sorted(p for p in folder.glob("step-*") if (p / STATE_FILE).is_file())
        if folder.is_dir()
        else []
    )
    return done[-1] if done else None


def rng_state() -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    policy: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    accelerator: Accelerator,
) -> Path:
    target = checkpoint_dir(output_dir, step)
    staging = target.parent / f".staging-{target.name}"
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    accelerator.wait_for_everyone()
    rank = accelerator.process_index
    try:
        torch.save(rng_state(), staging / f"rng-{rank}.pt")
        if uses_deepspeed(accelerator):
            torch.save(optimizer.state_dict(), staging / f"optimizer-{rank}.pt")
        if accelerator.is_main_process:
            policy.save_pretrained(staging / "adapter")
            if not uses_deepspeed(accelerator):
                torch.save(optimizer.state_dict(), staging / "optimizer.pt")
            torch.save(scheduler.state_dict(), staging / "scheduler.pt")
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            (staging / STATE_FILE).write_text(json.dumps({"step": step, **state}, indent=2))
    except OSError as error:
        # A partial checkpoint would only fill the disk further; the previous one stays usable.
        shutil.rmtree(staging, ignore_errors=True)
        raise checkpoint_write_error(error, target, latest_checkpoint(output_dir)) from error
    if accelerator.is_main_process:
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    accelerator.wait_for_everyone()
    return target


def checkpoint_write_error(error: OSError, target: Path, previous: Path | None) -> OSError:
    """The write failure, saying which checkpoint was lost and which one to resume from."""
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    cause = "the disk is full (no space left on the device)" if full else str(error)
    remedy = "free space" if full else "fix that"
    kept = (
        f"the previous checkpoint {previous} is complete: {remedy}, then resume from it with "
        "`--run.resume true`"
        if previous is not None
        else "there is no previous checkpoint"
    )
    return OSError(error.errno, f"checkpoint {target} not written: {cause}; {kept}")


def load_adapter_weights(policy: PeftModel, adapter_dir: str | Path) -> None:
    set_peft_model_state_dict(
        policy, load_file(str(Path(adapter_dir) / "adapter_model.safetensors"))
    )


def load_checkpoint(
    path: Path,
    policy: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    accelerator: Accelerator,
) -> dict[str, Any]:
    """Restore everything `save_checkpoint` wrote; returns the trainer state (step, position...)."""
    rng_file = path / f"rng-{accelerator.process_index}.pt"
    if not rng_file.is_file():
        raise FileNotFoundError(f"{rng_file} missing: resume with the same number of processes")
    load_adapter_weights(policy, path / "adapter")
    if uses_deepspeed(accelerator):
        load_zero_optimizer(path, optimizer, accelerator)
    else:
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(rng_file, weights_only=False))
    return json.loads((path / STATE_FILE).read_text())


def load_zero_optimizer(path: Path, optimizer: Any, accelerator: Accelerator) -> None:
    """Restore this process's ZeRO partition, fp32 master weights included (DeepSpeed reads the
    entry of its own rank from the list)."""
    files = [path / f"optimizer-{rank}.pt" for rank in range(accelerator.num_processes)]
    if not all(f.is_file() for f in files):
        raise FileNotFoundError(
            f"{path} has no per-process optimizer-<rank>.pt for {len(files)} processes: it was "
            "written by a run without DeepSpeed or with another process count; resume it the way "
            "it was launched"
        )
    states = [
        torch.load(f, weights_only=False) if rank == accelerator.process_index else None
        for rank, f in enumerate(files)
    ]
    # AcceleratedOptimizer.load_state_dict takes one dict; ZeRO's takes the list.
    optimizer.optimizer.load_state_dict(states, load_from_fp32_weights=True)
