"""One builder per cache entry.

Runs that share a cache folder (two seeds of a demo started together, two users of one
`.lexrl_cache`, the test suite's workers) would otherwise each build a missing entry and move
their copy over the other's while it is read. A lock file beside the entry serialises the
builders: the first builds, the others wait, then find the entry whole and reuse it. The lock is
an OS file lock (`filelock`), so a builder killed with SIGKILL releases it with its process.

A builder killed mid-write leaves its staging folder (`save_staged`'s `.tmp-*`) beside the
entries; the next build or read of the cache folder removes those untouched for an hour
(`remove_stale_staging`).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

MARKER = "config.json"
"""The file every model cache entry is written with last (`save_pretrained` in a staging folder
moved into place), so its presence means the entry is whole."""


def is_built(entry: Path) -> bool:
    """Whether the cache entry `entry` (a model folder) is whole."""
    return (entry / MARKER).is_file()


STALE_STAGING_S = 3600
"""How long a staging folder stays untouched before it counts as a killed writer's. A writer
touches its staging folder with every file it creates or writes, and no file of a cache entry
takes an hour to write."""


def last_touched(path: Path) -> float:
    """The newest modification time of `path` and of everything in it (0 when it is gone)."""
    newest = 0.0
    for root, folders, files in os.walk(path):
        for name in [root, *(os.path.join(root, f) for f in folders + files)]:
            try:
                newest = max(newest, os.stat(name, follow_symlinks=False).st_mtime)
            except OSError:
                continue
    try:
        return max(newest, os.stat(path, follow_symlinks=False).st_mtime)
    except OSError:
        return newest


def remove_stale_staging(folder: Path, max_age_s: float = STALE_STAGING_S) -> list[Path]:
    """Remove the staging leftovers (`.tmp-*`, folders or files) in the cache folder `folder`
    that nothing has touched for `max_age_s`: what a writer killed before it moved or removed
    them leaves, which no later write reuses. Returns what was removed; what cannot be removed
    (a read-only cache, another user's) is left as it is."""
    removed = []
    cutoff = time.time() - max_age_s
    for leftover in folder.glob(".tmp-*"):
        if last_touched(leftover) >= cutoff:
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
        if not leftover.exists():
            removed.append(leftover)
    return removed


def lock_path(entry: Path) -> Path:
    """The lock file of `entry`: hidden, beside it, so listing the cache shows only entries."""
    return entry.parent / f".{entry.name}.lock"


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold `entry`'s build lock; says so on stderr when another process holds it, since the
    wait can be as long as that process's build. Stale staging leftovers beside it are removed
    first (`remove_stale_staging`)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(entry.parent)
    lock = FileLock(lock_path(entry))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(
            f"cache: another process is building {entry}; waiting for it to finish",
            file=sys.stderr,
            flush=True,
        )
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def build_once(entry: Path, build: Callable[[Path], object]) -> Path:
    """`entry`, after `build(entry)` when it is not whole yet; one process builds at a time. A
    whole entry is returned without taking the lock, so a read-only cache still serves it; stale
    staging leftovers beside it are removed either way (`remove_stale_staging`)."""
    if is_built(entry):
        remove_stale_staging(entry.parent)
        return entry
    with entry_lock(entry):
        if not is_built(entry):
            build(entry)
    return entry
