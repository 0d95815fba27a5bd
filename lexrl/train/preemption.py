"""Stop at a step boundary when a cluster scheduler asks: Slurm (`scancel`, the end of the time
limit, preemption) and Kubernetes send SIGTERM, then SIGKILL a grace period later.

The handler only records the signal. The trainer looks at it once a step is complete, writes a
checkpoint and returns normally (exit code 0), so `--run.resume true` continues with the next
step: none lost, none done twice. Checkpointing from inside the handler could interrupt a
half-written checkpoint, an optimizer step or a collective of the other processes.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from accelerate import Accelerator

from lexrl.train.learner import sum_over_processes


class StopRequest:
    """Records SIGTERM while installed (from `__init__` to `restore`)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: Any = None
        # Python delivers signals to the main thread only, and refuses handlers from others
        # (a train() called from a worker thread keeps the default behaviour).
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._record)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signum

    def agreed(self, accelerator: Accelerator) -> bool:
        """Whether any process got the signal. Every process calls it at the end of every step
        (one all-reduce), so all of them leave the loop after the same step even when the
        scheduler's signals reach them at different moments."""
        asked = float(self.signal is not None)
        return sum_over_processes({"stop": asked}, accelerator)["stop"] > 0

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
