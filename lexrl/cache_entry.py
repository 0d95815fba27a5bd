"""One builder per cache entry.

Runs that share a cache folder (two seeds of a demo started together, two users of one
`.lexrl_cache`, the test suite's workers) would otherwise each build a missing entry and move
their copy over the other's while it is read. A lock file beside the entry serialises the
builders: the first builds, the others wait, then find the entry whole and reuse it. The lock is
an OS file lock (`filelock`), so a builder killed with SIGKILL releases it with its process.
"""

from __future__ import annotations

import sys
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


def lock_path(entry: Path) -> Path:
    """The lock file of `entry`: hidden, beside it, so listing the cache shows only entries."""
    return entry.parent / f".{entry.name}.lock"


@contextmanager
def entry_lock(entry: Path) -> Iterator[None]:
    """Hold `entry`'s build lock; says so on stderr when another process holds it, since the
    wait can be as long as that process's build."""
    entry.parent.mkdir(parents=True, exist_ok=True)
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
    whole entry is returned without taking the lock, so a read-only cache still serves it."""
    if is_built(entry):
        return entry
    with entry_lock(entry):
        if not is_built(entry):
            build(entry)
    return entry
