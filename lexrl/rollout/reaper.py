"""Stop a colocated vLLM engine's processes when the process that started them dies, however it
dies: SIGKILL, the kernel's OOM killer, a crash.

`vllm.LLM` starts its engine core (`VLLM::EngineCore`, with its worker) in processes that do not
notice their parent's death (vllm-project/vllm#34643 and #55510, open; the fix proposed in
#55846): a training run killed with -9 leaves them behind, reparented, holding the model and its
KV cache (3.6 GB for SmolLM2 on a CPU here) until someone kills them by hand, and the rerun that
`--run.resume true` starts then has that much less memory. `reap_on_death` starts a watcher for
the processes a block of code created: it polls its own parent (the trainer), and once the
trainer is gone (the watcher has been reparented) it stops those processes (SIGTERM, then
SIGKILL after a grace period) and exits. It is its own session, so a terminal's Ctrl-C, which
the trainer handles, does not stop it.

`python -m lexrl.rollout.reaper PARENT PID:START ...` is the watcher.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

POLL_S = 1.0
GRACE_S = 5.0


def descendants() -> dict[int, float]:
    """This process's descendants, each pid with its start time (pids are reused; the pair is
    not)."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            found[child.pid] = child.create_time()
        except psutil.NoSuchProcess:
            continue
    return found


@contextmanager
def reap_on_death() -> Iterator[None]:
    """Watch the processes started inside the block: if this process dies while they live, the
    watcher stops them. Processes started before the block (a W&B service, say) are left alone."""
    before = descendants()
    yield
    started = {pid: start for pid, start in descendants().items() if pid not in before}
    if started:
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid())]
            + [f"{pid}:{start!r}" for pid, start in started.items()],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def still_same(pid: int, start: float) -> psutil.Process | None:
    """Process `pid` if it is still the one that started at `start`, else None."""
    try:
        process = psutil.Process(pid)
        return process if process.create_time() == start else None
    except psutil.NoSuchProcess:
        return None


def stop(targets: list[tuple[int, float]], grace_s: float = GRACE_S) -> int:
    """SIGTERM each target still alive (vLLM's engine shuts down on it), SIGKILL those still up
    after `grace_s`; the number stopped."""
    alive = [p for p in (still_same(pid, start) for pid, start in targets) if p is not None]
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, survivors = psutil.wait_procs(alive, timeout=grace_s)
    for process in survivors:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    return len(alive)


def watch(parent: int, targets: list[tuple[int, float]], poll_s: float = POLL_S) -> int:
    """Wait until `parent` is no longer this process's parent (it died and we were reparented),
    then stop `targets`; the number stopped."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    return stop(targets)


def main(argv: list[str]) -> None:
    parent, *targets = argv
    pairs = [(int(pid), float(start)) for pid, start in (t.split(":") for t in targets)]
    stopped = watch(int(parent), pairs)
    if stopped:
        print(
            f"lexrl: process {parent} died; stopped {stopped} vLLM engine process(es) it left",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
