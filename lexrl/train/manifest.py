"""A checkpoint folder's names, its manifest, and verification against it.

The last file a checkpoint write leaves is `manifest.json`: the relative path, size and sha256 of
every other file, and the package each env of the run came from (`env_packages`). A checkpoint
is complete only when its files match it (`verify_checkpoint`), so a file truncated or lost after
the write is found before anything loads it, and resume falls back to the newest checkpoint that
verifies (`choose_checkpoint`). Apart from `checkpoint` (the writer and loader), so that
`lexrl eval --checkpoint` names a damaged checkpoint before it imports torch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexrl.errors import CheckpointError, DamagedCheckpoint

STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
ADAPTER_FILE = "adapter/adapter_model.safetensors"
HASH_CHUNK = 1 << 20
"""Bytes read at a time when hashing: an optimizer state is never held in memory twice."""


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / "checkpoints" / f"step-{step:06d}"


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


def build_manifest(folder: Path, env_packages: dict[str, Any] | None = None) -> dict[str, Any]:
    """Relative path -> size and sha256 of every file under `folder` but the manifest itself;
    and, given, `env_packages`: the package, version and data-and-prompts hash of each env the
    run trained on (`lexrl.eval.provenance.env_packages`), a record that verification does not
    check (an env upgraded mid-run leaves the checkpoint's files intact)."""
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder) != Path(MANIFEST_FILE)
    )
    manifest: dict[str, Any] = {
        "format": 1,
        "files": {
            p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": file_digest(p)}
            for p in files
        },
    }
    if env_packages is not None:
        manifest["env_packages"] = env_packages
    return manifest


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
