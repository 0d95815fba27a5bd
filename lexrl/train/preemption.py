"""Stop at a step boundary when a cluster scheduler asks (Slurm's `scancel`, the end of the time
limit, preemption and Kubernetes send SIGTERM, then SIGKILL a grace period later) or the user
presses Ctrl-C (SIGINT) once. A second Ctrl-C aborts at once: the run resumes from the last
checkpoint.

The handler only records the signal. The trainer looks at it once a step is complete, writes a
checkpoint and returns normally (exit code 0), so `--run.resume true` continues with the next
step: none lost, none done twice. Checkpointing from inside the handler could interrupt a
half-written checkpoint, an optimizer step or a collective of the other processes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from accelerate import Accelerator

from lexrl.train.learner import sum_over_processes

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


ABORTED = "aborted; continue from the last checkpoint with `--run.resume true`"
FINISHING = (
    "finishing this step and writing a checkpoint (Ctrl-C again aborts; the run then resumes "
    "from the last checkpoint)"
)


def abort(aborted: str = ABORTED) -> None:
    """End the process now, exit code 130, saying `aborted` (how to go on). A KeyboardInterrupt
    raised here would surface in whatever runs at that moment (an asyncio callback of the
    rollout, a worker thread) and be printed as its traceback; the checkpoints on disk are
    complete either way (atomic renames), and the run folder's lock goes with the process."""
    print(f"\ninterrupted (Ctrl-C): {aborted}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(130)


class StopRequest:
    """Records SIGTERM and a first SIGINT while installed (from `__init__` to `restore`),
    saying `finishing` (what happens now) at the first Ctrl-C and `aborted` (how to go on) at a
    second, which ends the process; the defaults are a training run's."""

    def __init__(self, finishing: str = FINISHING, aborted: str = ABORTED) -> None:
        self.finishing, self.aborted = finishing, aborted
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}
        # Python delivers signals to the main thread only, and refuses handlers from others
        # (a train() called from a worker thread keeps the default behaviour).
        if threading.current_thread() is threading.main_thread():
            # A signal the process was started ignoring stays ignored: a shell starts background
            # jobs (`lexrl train ... &`) with SIGINT ignored, so that Ctrl-C meant for the shell
            # does not reach them.
            self._previous = {
                s: signal.signal(s, self._record)
                for s in STOP_SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN
            }

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and self.signal == signal.SIGINT:
            abort(self.aborted)
        if signum == signal.SIGINT:
            print(f"Ctrl-C: {self.finishing}", file=sys.stderr)
        self.signal = signum

    @property
    def name(self) -> str:
        """The signal received, e.g. `SIGTERM` (empty when none)."""
        return signal.Signals(self.signal).name if self.signal is not None else ""

    def agreed(self, accelerator: Accelerator) -> bool:
        """Whether any process got the signal. Every process calls it at the end of every step
        (one all-reduce), so all of them leave the loop after the same step even when the
        scheduler's signals reach them at different moments."""
        asked = float(self.signal is not None)
        return sum_over_processes({"stop": asked}, accelerator)["stop"] > 0

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}
