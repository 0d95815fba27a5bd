"""SIGTERM and Ctrl-C while a command's event loop runs: recorded, and the work in progress
cancelled, so the command ends where it can say what was kept.

`CancellingStop` is what `lexrl eval`'s chunks (`lexrl.eval.partial.SignalStop`) and the
warm-start's teacher replay (`lexrl.train.warmstart.ReplayStop`) share: within `with` (in the
main thread; elsewhere the signals keep their handlers) the first signal is recorded and the
coroutine running under `cancellable` is cancelled; the caller then ends where it calls its own
`check`. A second signal goes to `second` (default: the handler the signal had before, as if
the stop were not there).

The handler only records the signal and asks the event loop of the coroutine in progress, if
any, to cancel it. Raising from the handler would surface in whatever the main thread runs at
that moment: an asyncio callback or the shutdown of an event loop, where asyncio logs it as a
traceback of its own, or an object's `__del__`, where it is swallowed and the command goes on.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class CancellingStop:
    """Records SIGTERM or SIGINT and cancels the coroutine under `cancellable` (see the module)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._running: asyncio.Task | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> CancellingStop:
        if threading.current_thread() is threading.main_thread():
            # A signal the process was started ignoring (SIGINT of a background job) stays so.
            self._previous = {
                signum: signal.signal(signum, self._record)
                for signum in STOP_SIGNALS
                if signal.getsignal(signum) is not signal.SIG_IGN
            }
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            self.second(signum)
            return
        self.signum = signum
        if self._running is not None:
            # Queues the call and wakes the loop, nothing more: safe from a handler, which may run
            # in the middle of the loop's own code.
            self._running.get_loop().call_soon_threadsafe(self._running.cancel)

    def second(self, signum: int) -> None:
        """A second signal: handled as it would be without this stop (its earlier handler, or
        the default, which ends the process)."""
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.__exit__()
        if callable(previous):
            previous(signum, None)
        else:
            signal.raise_signal(signum)

    async def cancellable(self, coroutine: Coroutine[Any, Any, T]) -> T | None:
        """What `coroutine` returns, run as a task a signal cancels; None once a signal came."""
        self._running = asyncio.current_task()
        try:
            if self.signum is None:
                return await coroutine
        except asyncio.CancelledError:
            if self.signum is None:
                raise
        finally:
            self._running = None
            # Not awaited when the signal came first; closing it spares a "never awaited" warning.
            coroutine.close()
        return None
