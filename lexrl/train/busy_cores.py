"""torch's CPU threads for a run started on cores other work already keeps busy.

torch starts one thread per core. Two CPU runs started side by side each take every core, and
their threads then wait on each other: two `lexrl train` runs with 2 threads each on 2 cores ran
their steps about 7x slower than one alone (53-71 s a step instead of 5-8, docs/benchmarks.md),
and the `lexrl new-env` scaffold's train (8 GRPO steps) took 260 s with torch's 2 threads on 2
cores at load 4.4 (a busy loop and other runs) against 74 s with one thread. So on a
busy CPU lexrl gives torch only the cores the load leaves free, and says so; `OMP_NUM_THREADS`
or `run.torch_threads` overrides it.
"""

from __future__ import annotations

import math
import os
import sys

BUSY_SHARE = 0.5
"""The cores are busy when the 1-minute load average is at least this share of them, so one busy
core of two counts: a thread too many on busy cores cost 3.5x above, a thread too few on cores
that fall idle costs at most the parallel speed-up."""


def free_cores_share(load: float, cores: int, threads: int) -> int | None:
    """The torch threads for a run about to use `threads` of `cores` cores while the machine's
    1-minute load average is `load`: one per core the load leaves free, at least 1; None (keep
    `threads`) when the cores are not busy or `threads` is already no more than that share."""
    if cores <= 0 or load < BUSY_SHARE * cores:
        return None
    share = max(1, cores - math.ceil(load))
    return share if share < threads else None


def threads_note(load: float, cores: int, default: int, picked: int) -> str:
    """The line that says which torch threads a busy CPU got, why, and how to choose them."""
    return (
        f"torch threads: {picked}, not torch's default {default}: the CPU is busy (load "
        f"{load:.1f} on {cores} cores) and more threads would compete with that work, which can "
        f"slow each step several-fold; set OMP_NUM_THREADS or --run.torch_threads to choose"
    )


def choose_torch_threads(requested: int | None, announce: bool) -> int:
    """Set torch's CPU threads for this process and return them: `requested`
    (`run.torch_threads`) when set; else, when `OMP_NUM_THREADS` is set, torch's own count from
    it, untouched; else on a CPU-only machine whose cores are busy, `free_cores_share` of them,
    said on stderr in one line (`threads_note`) when `announce` (the main process)."""
    import torch

    if requested is not None:
        torch.set_num_threads(requested)
        return requested
    default = torch.get_num_threads()
    if (
        "OMP_NUM_THREADS" in os.environ
        or torch.cuda.is_available()
        or not hasattr(os, "getloadavg")
    ):
        return default
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    picked = free_cores_share(load, cores, default)
    if picked is None:
        return default
    torch.set_num_threads(picked)
    if announce:
        print(threads_note(load, cores, default, picked), file=sys.stderr, flush=True)
    return picked
