"""Atomic checkpoints: adapter, optimizer, scheduler, RNG of every process, step, data position.

A checkpoint is written into a hidden staging folder and renamed into `checkpoints/step-NNNNNN`
in one `os.replace`, so a run killed at any moment leaves only complete checkpoints behind.
A write that fails (a full disk, a file-size limit, a read-only filesystem) removes the staging
folder and raises, naming the checkpoint and the previous one, which is untouched: the run stops
rather than train on without a checkpoint. With several processes each step of the write ends
with an all-reduce of "did yours fail", so a failure on one process ends every process instead of
leaving the others at a barrier.
Under DeepSpeed ZeRO each process holds a partition of the optimizer state (and of the fp32
master weights), so each writes its own `optimizer-<rank>.pt`.

The last file written is `manifest.json` (`lexrl.train.manifest`): the relative path, size and
sha256 of every other file, so a file truncated or lost after the write (a disk error, a copy cut
short, a hand-edit) is found before resume loads it; it also records the package, version and
data-and-prompts hash of each env the run trained on, when the trainer gives them.
`trainer_state.json` also records the env, base model and LoRA shape it was written with: a
resume with other values would load the adapter of another run, and is refused
(`refuse_another_config`).
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from accelerate import Accelerator
from peft import PeftModel, set_peft_model_state_dict
from safetensors import SafetensorError
from safetensors.torch import load_file

from lexrl.errors import CheckpointError, CheckpointNotWritten, ConfigError
from lexrl.models import os_error_of
from lexrl.train.learner import sum_over_processes, uses_deepspeed
from lexrl.train.manifest import (
    ADAPTER_FILE,
    MANIFEST_FILE,
    STATE_FILE,
    build_manifest,
    checkpoint_dir,
    latest_checkpoint,
)

RUN_KEY = "config"
"""The key of `STATE_FILE` that records the config values a resume must share."""

T = TypeVar("T")


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


class _NamedWriteError:
    """A file for `torch.save` whose failed write raises an OSError naming the file, and keeps
    it: torch may swallow it and raise a RuntimeError that names neither the cause nor the file."""

    def __init__(self, stream: Any, path: Path) -> None:
        self.stream = stream
        self.path = path
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        view = memoryview(data)
        try:
            while view:
                view = view[self.stream.write(view) :]
        except OSError as error:
            self.error = OSError(error.errno, error.strerror, str(self.path))
            raise self.error from error
        return len(data)

    def flush(self) -> None:
        self.stream.flush()


def save_torch(obj: Any, path: Path) -> None:
    """`torch.save`, a failed write an OSError with its errno and `path`."""
    # Unbuffered: a buffered file's last write would fail at close, outside torch.save.
    with open(path, "wb", buffering=0) as stream:
        file = _NamedWriteError(stream, path)
        try:
            torch.save(obj, file)
        except RuntimeError as error:
            if file.error is None:
                raise
            raise file.error from error


def save_adapter(policy: PeftModel, folder: Path) -> None:
    """`policy.save_pretrained(folder)`, a failed safetensors write an OSError with its errno and
    the file (safetensors raises its own error, the errno only in its text)."""
    try:
        policy.save_pretrained(folder)
    except SafetensorError as error:
        raised = os_error_of(error, folder / Path(ADAPTER_FILE).name)
        if raised is None:
            raise
        raise raised from error


def write_together(accelerator: Accelerator, write: Callable[[], object]) -> None:
    """Run this process's part of a write, then learn whether every process's part succeeded (one
    all-reduce, which also stands for a barrier). A failure raises on every process: one that
    gave up would otherwise leave the others waiting at the next barrier for good."""
    try:
        write()
    except OSError:
        sum_over_processes({"failed": 1.0}, accelerator)
        raise
    if sum_over_processes({"failed": 0.0}, accelerator)["failed"]:
        raise OSError("another process could not write its part (its own error says why)")


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    policy: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    accelerator: Accelerator,
    env_packages: dict[str, Any] | None = None,
) -> Path:
    """Write checkpoint `step` atomically; its manifest records `env_packages` when given (the
    run's `lexrl.eval.provenance.env_packages`)."""
    target = checkpoint_dir(output_dir, step)
    staging = target.parent / f".staging-{target.name}"
    main = accelerator.is_main_process
    try:
        write_together(accelerator, lambda: main and make_staging(staging))
        write_together(
            accelerator, lambda: write_parts(staging, policy, optimizer, scheduler, accelerator)
        )
        write_together(
            accelerator,
            lambda: main and seal(staging, target, {"step": step, **state}, env_packages),
        )
    except OSError as error:
        # A partial checkpoint would only fill the disk further; the previous one stays usable.
        if main:
            shutil.rmtree(staging, ignore_errors=True)
        raise checkpoint_write_error(error, target, latest_checkpoint(output_dir)) from error
    return target


def make_staging(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)


def write_parts(
    staging: Path,
    policy: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    accelerator: Accelerator,
) -> None:
    """This process's files: its RNG (and ZeRO partition); the main process's also the adapter,
    the optimizer and the scheduler."""
    rank = accelerator.process_index
    save_torch(rng_state(), staging / f"rng-{rank}.pt")
    if uses_deepspeed(accelerator):
        save_torch(optimizer.state_dict(), staging / f"optimizer-{rank}.pt")
    if accelerator.is_main_process:
        save_adapter(policy, staging / "adapter")
        if not uses_deepspeed(accelerator):
            save_torch(optimizer.state_dict(), staging / "optimizer.pt")
        save_torch(scheduler.state_dict(), staging / "scheduler.pt")


def seal(
    staging: Path, target: Path, state: dict[str, Any], env_packages: dict[str, Any] | None = None
) -> None:
    """Write the trainer state and, last, the manifest (with `env_packages`, given); then move
    the checkpoint into place."""
    (staging / STATE_FILE).write_text(json.dumps(state, indent=2))
    # Last, after every process's files: a checkpoint is complete when its files match.
    manifest = json.dumps(build_manifest(staging, env_packages), indent=2)
    (staging / MANIFEST_FILE).write_text(manifest)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


def checkpoint_write_error(
    error: OSError, target: Path, previous: Path | None, what: str = "checkpoint"
) -> CheckpointNotWritten:
    """The write failure of `what` (a checkpoint, the adapter handed to the rollout backend),
    saying which one was lost and which checkpoint to resume from."""
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    if full:
        cause = "the disk is full (no space left on the device)"
    elif error.strerror and error.filename:
        cause = f"{error.strerror}: {error.filename}"
    else:
        cause = str(error)
    remedy = "free space" if full else "fix that"
    kept = (
        f"the previous checkpoint {previous} is complete: {remedy}, then resume from it with "
        "`--run.resume true`"
        if previous is not None
        else "there is no previous checkpoint"
    )
    return CheckpointNotWritten(error.errno, f"{what} {target} not written: {cause}; {kept}")


def load_file_of(checkpoint: Path, name: str, read: Callable[[Path], T]) -> T:
    """`read(checkpoint / name)`, any failure (a truncated pickle, a bad safetensors header, a
    state that does not fit this run) a `CheckpointError` naming the file."""
    try:
        return read(checkpoint / name)
    except Exception as error:  # torch.load and safetensors raise many unrelated types
        raise CheckpointError(
            f"checkpoint {checkpoint}: {name} cannot be loaded: {type(error).__name__}: {error}"
        ) from error


def load_adapter_weights(policy: PeftModel, adapter_dir: str | Path) -> None:
    adapter_dir = Path(adapter_dir)
    load_file_of(
        adapter_dir.parent,
        f"{adapter_dir.name}/adapter_model.safetensors",
        lambda path: set_peft_model_state_dict(policy, load_file(str(path))),
    )


def torch_state(path: Path) -> Any:
    return torch.load(path, weights_only=False)


def load_checkpoint(
    path: Path,
    policy: PeftModel,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    accelerator: Accelerator,
) -> dict[str, Any]:
    """Restore everything `save_checkpoint` wrote; returns the trainer state (step, position...)."""
    rng_name = f"rng-{accelerator.process_index}.pt"
    if not (path / rng_name).is_file():
        raise CheckpointError(
            f"checkpoint {path}: {rng_name} missing: resume with the same number of processes"
        )
    load_adapter_weights(policy, path / "adapter")
    if uses_deepspeed(accelerator):
        load_zero_optimizer(path, optimizer, accelerator)
    else:
        load_file_of(path, "optimizer.pt", lambda f: optimizer.load_state_dict(torch_state(f)))
    load_file_of(path, "scheduler.pt", lambda f: scheduler.load_state_dict(torch_state(f)))
    load_file_of(path, rng_name, lambda f: set_rng_state(torch_state(f)))
    return load_file_of(path, STATE_FILE, lambda f: json.loads(f.read_text()))


def refuse_another_config(checkpoint: Path, record: dict[str, Any]) -> None:
    """Raise a ConfigError naming each key of `record` (this run's env and its options, model
    and LoRA shape) whose value the checkpoint recorded otherwise: resuming would load another
    run's adapter onto this base, or go on with another env's data positions or objective. A checkpoint written before the record
    existed is resumed unchecked, and a key an older checkpoint did not record is not checked."""
    state = load_file_of(checkpoint, STATE_FILE, lambda f: json.loads(f.read_text()))
    recorded = state.get(RUN_KEY)
    if recorded is None:
        return
    other_env = recorded.get("env.name", record.get("env.name")) != record.get("env.name")
    differing = [
        f"{key} is {json.dumps(recorded[key])} there, {json.dumps(value)} here"
        for key, value in record.items()
        if key in recorded
        and recorded[key] != value
        # Another env's options are not comparable one by one: its name says it all.
        and not (other_env and key.startswith("env.") and key != "env.name")
    ]
    if differing:
        raise ConfigError(
            f"checkpoint {checkpoint} belongs to another run: {'; '.join(differing)}; resume it "
            f"with the values it was written with ({checkpoint.parents[1] / 'config.yaml'}), or "
            "start this run in another `run.output_dir`"
        )


def load_zero_optimizer(path: Path, optimizer: Any, accelerator: Accelerator) -> None:
    """Restore this process's ZeRO partition, fp32 master weights included (DeepSpeed reads the
    entry of its own rank from the list)."""
    names = [f"optimizer-{rank}.pt" for rank in range(accelerator.num_processes)]
    if not all((path / name).is_file() for name in names):
        raise CheckpointError(
            f"{path} has no per-process optimizer-<rank>.pt for {len(names)} processes: it was "
            "written by a run without DeepSpeed or with another process count; resume it the way "
            "it was launched"
        )
    own = names[accelerator.process_index]
    states = [load_file_of(path, name, torch_state) if name == own else None for name in names]
    # AcceleratedOptimizer.load_state_dict takes one dict; ZeRO's takes the list.
    load_file_of(
        path,
        own,
        lambda _: optimizer.optimizer.load_state_dict(states, load_from_fp32_weights=True),
    )
