"""One run per output folder: `lexrl train` holds a lock on `run.output_dir` while it runs.

Two runs writing into one folder replace each other's checkpoints and interleave their
`metrics.jsonl`, with both exiting 0. The lock is an `fcntl.flock` on `<output_dir>/.lexrl.lock`,
which the kernel releases when its holder dies however it dies, so a lock left by a crashed or
SIGKILLed run is taken over without guessing from PIDs (a PID of another host cannot be checked).
The file records the holder's host, PID and start time, for the message that refuses a second
run and for the warning that takes a stale lock over.

A folder is not reused by accident either: a new run (not `run.resume`) in a folder that holds a
finished or stopped run's checkpoints or logged steps is refused (`refuse_another_run`). It would
empty that run's `metrics.jsonl`, replace its checkpoints one by one, and, stopped half-way, leave
its own steps beside the other run's for a later resume to mix.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from lexrl.errors import RunFolderLocked, RunFolderTaken

LOCK_NAME = ".lexrl.lock"
LOGS = ("metrics.jsonl", "samples.jsonl")
"""The files of a run's logged steps."""


def describe_holder(text: str) -> str:
    """`host` PID `pid`, started `time`, from a lock file's contents (or what is readable)."""
    try:
        holder = json.loads(text)
        return f"{holder['host']} PID {holder['pid']}, started {holder['started']}"
    except (ValueError, KeyError, TypeError):
        return "an unknown holder (the lock file is unreadable)"


def _open_locked(path: Path) -> int:
    """A descriptor of `path` with the exclusive lock taken. Raises BlockingIOError while a live
    process holds it. Retries when the holder removed the file between our open and our lock,
    which would leave us locking a file nobody else can see."""
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise
        try:
            if os.stat(path).st_ino == os.fstat(descriptor).st_ino:
                return descriptor
        except FileNotFoundError:
            pass
        os.close(descriptor)


@contextmanager
def hold_run_folder(output_dir: str | Path) -> Iterator[None]:
    """Hold `output_dir` for the duration: refuse (`RunFolderLocked`, naming the holder) while
    another live run holds it; take over, with a warning on stderr, a lock whose holder is
    gone. The lock file is removed when the run ends, and the folder too if the run created it
    and left nothing in it (a run refused by a later check)."""
    folder = Path(output_dir)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    try:
        descriptor = _open_locked(path)
    except BlockingIOError:
        holder = describe_holder(path.read_text(encoding="utf-8", errors="replace"))
        raise RunFolderLocked(
            f"{folder} is in use by another run ({holder}; lock {path}): wait for it, stop "
            "it, or set another `run.output_dir`"
        ) from None
    stale = os.read(descriptor, 4096).decode("utf-8", errors="replace")
    if stale.strip():
        print(
            f"warning: {path}: taking over the lock of a run that is gone "
            f"({describe_holder(stale)})",
            file=sys.stderr,
        )
    record = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, json.dumps(record).encode(), 0)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(descriptor)
        if created and not any(folder.iterdir()):
            folder.rmdir()


def run_folder_lock(output_dir: str | Path) -> AbstractContextManager[None]:
    """`hold_run_folder` in the main process of a launch (`RANK` 0, or no launcher); the other
    processes of the same launch share its folder."""
    if os.environ.get("RANK", "0") != "0":
        return nullcontext()
    return hold_run_folder(output_dir)


def refuse_another_run(output_dir: str | Path) -> None:
    """Raise `RunFolderTaken` if `output_dir` holds another run's checkpoints or logged steps (a
    new run would overwrite them); its lock file alone, or a staging folder, is no run."""
    folder = Path(output_dir)
    steps = _checkpoint_steps(folder)
    found = [f"checkpoints up to {steps[-1]}"] if steps else []
    found += [f"{name} to step {step}" for name in LOGS if (step := _last_step(folder / name))]
    if found:
        raise RunFolderTaken(
            f"{folder} holds another run ({', '.join(found)}): continue it with "
            "`--run.resume true`, or start this run in another `run.output_dir`"
        )


def _checkpoint_steps(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder / "checkpoints").glob("step-*") if p.is_dir())


def _last_step(path: Path) -> str | None:
    """The step of a log's last readable line (a crash may cut the last one short), `?` when no
    line is readable, None when the log is missing or empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        try:
            return str(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return "?" if lines else None
