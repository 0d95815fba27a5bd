"""A warning when a CPU run starts on cores other work already keeps busy.

torch starts one thread per core. Two CPU runs started side by side each take every core, and
their threads then wait on each other: two `lexrl train` runs with 2 threads each on 2 cores ran
their steps about 7x slower than one alone (53-71 s a step instead of 5-8, docs/benchmarks.md),
where one thread each costs far less. The fix is the user's (`OMP_NUM_THREADS`), so lexrl only
says so, once, at the start.
"""

from __future__ import annotations

import math
import os
import sys

BUSY_SHARE = 0.75
"""Warn when the 1-minute load average is at least this share of the cores."""


def busy_cores_warning(load: float, cores: int, threads: int, threads_set: bool) -> str | None:
    """The warning for a run about to use `threads` torch threads on `cores` cores while the
    machine's 1-minute load average is `load`; None when `OMP_NUM_THREADS` is set
    (`threads_set`: the user chose), the run takes one thread, or the cores are not busy."""
    if threads_set or threads <= 1 or cores <= 0 or load < BUSY_SHARE * cores:
        return None
    share = max(1, cores - math.ceil(load))
    return (
        f"warning: the CPU is busy (load {load:.1f} on {cores} cores) and torch will run "
        f"{threads} threads that compete with that work, which can slow each step several-fold; "
        f"start the run with OMP_NUM_THREADS={share} (its share of the cores) to avoid it"
    )


def warn_if_cores_busy() -> None:
    """Print `busy_cores_warning` for this machine and process on stderr, if any (CPU only)."""
    import torch

    if torch.cuda.is_available() or not hasattr(os, "getloadavg"):
        return
    message = busy_cores_warning(
        os.getloadavg()[0],
        os.cpu_count() or 1,
        torch.get_num_threads(),
        "OMP_NUM_THREADS" in os.environ,
    )
    if message:
        print(message, file=sys.stderr, flush=True)
