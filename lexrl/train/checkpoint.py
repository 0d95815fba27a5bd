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

The last file written is `manifest.json`: the relative path, size and sha256 of every other file.
A checkpoint is complete only when its files match it (`verify_checkpoint`), so a file truncated
or lost after the write (a disk error, a copy cut short, a hand-edit) is found before resume loads
it, and resume falls back to the newest checkpoint that verifies (`choose_checkpoint`).
`trainer_state.json` also records the env, base model and LoRA shape it was written with: a
resume with other values would load the adapter of another run, and is refused
(`refuse_another_config`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from accelerate import Accelerator
from peft import PeftModel, set_peft_model_state_dict
from safetensors import SafetensorError
from safetensors.torch import load_file

from lexrl.errors import CheckpointError, ConfigError
from lexrl.models import os_error_of
from lexrl.train.learner import sum_over_processes, uses_deepspeed

STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
ADAPTER_FILE = "adapter/adapter_model.safetensors"
HASH_CHUNK = 1 << 20
"""Bytes read at a time when hashing: an optimizer state is never held in memory twice."""
RUN_KEY = "config"
"""The key of `STATE_FILE` that records the config values a resume must share."""

T = TypeVar("T")


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / "checkpoints" / f"step-{step:06d}"


class DamagedCheckpoint(CheckpointError):
    """A checkpoint whose files do not match its manifest (or that has none). `reason` names the
    file and what is wrong with it, for a `skipped <checkpoint>: <reason>` line."""

    def __init__(self, checkpoint: Path, reason: str) -> None:
        self.checkpoint = Path(checkpoint)
        self.reason = reason
        super().__init__(
            f"checkpoint {checkpoint} is damaged: {reason}; use an earlier checkpoint "
            "(`--run.resume true` skips damaged ones by itself)"
        )


class CheckpointNotWritten(CheckpointError, OSError):
    """A checkpoint write that failed. Still an `OSError` with the errno of the cause, for the
    callers that tell a full disk from other failures."""

    def __str__(self) -> str:
        # OSError's own str prefixes "[Errno N] ", noise in the CLI's one-line message.
        return str(self.strerror)


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoint to resume from (None: start from scratch), the newer ones skipped because
    they failed verification (newest first), and whether the chosen one was verified (False for a
    checkpoint written before checkpoints had a manifest)."""

    checkpoint: Path | None
    skipped: list[DamagedCheckpoint] = field(default_factory=list)
    verified: bool = True

    def report(self) -> list[str]:
        """One line per skipped checkpoint, then one if the chosen one could not be verified."""
        lines = [f"skipped {damaged.checkpoint}: {damaged.reason}" for damaged in self.skipped]
        if self.checkpoint is not None and not self.verified:
            lines.append(
                f"{self.checkpoint} has no {MANIFEST_FILE} (written before checkpoints had one): "
                "resuming from it unverified"
            )
        return lines


def checkpoint_candidates(output_dir: str | Path) -> list[Path]:
    """Every `checkpoints/step-*` folder, newest first (staging folders are hidden, so left out)."""
    folder = Path(output_dir) / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("step-*") if p.is_dir()), reverse=True)


def choose_checkpoint(output_dir: str | Path) -> CheckpointChoice:
    """The newest checkpoint that verifies, and the newer ones skipped with why. Every process of a
    run calls this on the same shared disk and so picks the same checkpoint."""
    skipped: list[DamagedCheckpoint] = []
    for candidate in checkpoint_candidates(output_dir):
        try:
            verified = verify_checkpoint(candidate)
        except DamagedCheckpoint as damaged:
            skipped.append(damaged)
            continue
        return CheckpointChoice(candidate, skipped, verified)
    return CheckpointChoice(None, skipped)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest checkpoint that verifies, or None (see `choose_checkpoint` for the skipped)."""
    return choose_checkpoint(output_dir).checkpoint


def file_digest(path: Path) -> str:
    """The sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def build_manifest(folder: Path) -> dict[str, Any]:
    """Relative path -> size and sha256 of every file under `folder` but the manifest itself."""
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder) != Path(MANIFEST_FILE)
    )
    return {
        "format": 1,
        "files": {
            p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": file_digest(p)}
            for p in files
        },
    }


def read_manifest(checkpoint: Path) -> dict[str, dict[str, Any]]:
    """The manifest's file entries; a manifest that cannot be read or parsed damages the
    checkpoint like any other file."""
    try:
        manifest = json.loads((checkpoint / MANIFEST_FILE).read_text())
        files = manifest["files"]
        if not all(isinstance(e, dict) and {"size", "sha256"} <= e.keys() for e in files.values()):
            raise ValueError("an entry lacks its size or sha256")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise DamagedCheckpoint(checkpoint, f"{MANIFEST_FILE} is unreadable: {error}") from error
    return files


def manifest_problem(checkpoint: Path, files: dict[str, dict[str, Any]]) -> str | None:
    """Why the files of `checkpoint` do not match the manifest entries `files`, or None. Sizes
    first, over all files, so a missing or truncated file is found without hashing the others."""
    for name, entry in files.items():
        path = checkpoint / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as error:
            return f"{name} is unreadable: {error.strerror or error}"
        if size != entry["size"]:
            return f"{name} is {size} bytes, the manifest says {entry['size']}"
    for name, entry in files.items():
        try:
            digest = file_digest(checkpoint / name)
        except OSError as error:
            return f"{name} is unreadable: {error.strerror or error}"
        if digest != entry["sha256"]:
            return f"{name} has the right size but not the sha256 the manifest says: it is corrupt"
    return None


def legacy_problem(checkpoint: Path, within: str | None = None) -> str | None:
    """Why a checkpoint without a manifest cannot be used: no trainer state (its write never
    finished) or a file `load_checkpoint` needs (under `within`, if given) is gone. Sizes and
    contents cannot be checked without a manifest."""
    if not (checkpoint / STATE_FILE).is_file():
        return f"no {MANIFEST_FILE} and no {STATE_FILE}: its write did not finish"
    needed = [ADAPTER_FILE, "scheduler.pt", "rng-0.pt"]
    if not (checkpoint / "optimizer-0.pt").is_file():
        needed.append("optimizer.pt")
    if within is not None:
        needed = [name for name in needed if name.startswith(f"{within}/")]
    missing = next((name for name in needed if not (checkpoint / name).is_file()), None)
    return f"{missing} is missing" if missing else None


def verify_checkpoint(checkpoint: str | Path, within: str | None = None) -> bool:
    """Raise `DamagedCheckpoint` (naming the checkpoint, the file and what is wrong) unless the
    files of `checkpoint` match its manifest; `within` ("adapter") checks only the files under
    that folder, all an evaluation reads. Returns True when verified, False for a checkpoint
    written before manifests (it has `trainer_state.json` and the files resume needs, but sizes
    and contents cannot be checked): refusing it would make a run upgraded mid-way start over from
    step 0, and the old writer was atomic too."""
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        raise CheckpointError(f"checkpoint {checkpoint}: no such folder")
    steps = sorted(checkpoint.glob("step-*/"))
    if steps and not (checkpoint / MANIFEST_FILE).is_file():
        raise CheckpointError(
            f"{checkpoint} is the folder of a run's checkpoints, not one: give one of them, "
            f"e.g. {steps[-1]}"
        )
    if not (checkpoint / MANIFEST_FILE).is_file():
        problem = legacy_problem(checkpoint, within)
        if problem is not None:
            raise DamagedCheckpoint(checkpoint, problem)
        return False
    files = read_manifest(checkpoint)
    if within is not None:
        files = {name: entry for name, entry in files.items() if name.startswith(f"{within}/")}
        if not files:
            raise DamagedCheckpoint(checkpoint, f"{MANIFEST_FILE} lists no file in {within}/")
    problem = manifest_problem(checkpoint, files)
    if problem is not None:
        raise DamagedCheckpoint(checkpoint, problem)
    return True


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
) -> Path:
    target = checkpoint_dir(output_dir, step)
    staging = target.parent / f".staging-{target.name}"
    main = accelerator.is_main_process
    try:
        write_together(accelerator, lambda: main and make_staging(staging))
        write_together(
            accelerator, lambda: write_parts(staging, policy, optimizer, scheduler, accelerator)
        )
        write_together(accelerator, lambda: main and seal(staging, target, {"step": step, **state}))
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


def seal(staging: Path, target: Path, state: dict[str, Any]) -> None:
    """Write the trainer state and, last, the manifest; then move the checkpoint into place."""
    (staging / STATE_FILE).write_text(json.dumps(state, indent=2))
    # Last, after every process's files: a checkpoint is complete when its files match.
    manifest = json.dumps(build_manifest(staging), indent=2)
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
