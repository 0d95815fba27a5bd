"""Errors raised in an env plugin's own code, told from lexrl's bugs by where they were raised.

An env a user installs (any distribution declaring an entry point of `lexrl.envs` other than
lexrl itself) runs inside every command: its tasks, prompts, rewards, teacher and degenerate
policies. An exception escaping from its code is the plugin's fault, not lexrl's: the command
ends in one `env error` line naming the plugin's distribution and version, the env, the call and
the task, and the plugin's traceback, scrubbed of every key lexrl knows (`lexrl.secrets.scrub`),
is written to a file the line names (and printed with `LEXRL_TRACEBACK=1`). lexrl's bug footer
("report it to lexrl") is for exceptions raised outside every plugin.

The one boundary is the traceback itself: `plugin_origin` walks the frames an exception passed
through (its cause and context too), so a call into plugin code needs no wrapper of its own, in
any thread or coroutine whose exception reaches the command. The rollout engine adds the task an
episode was playing (`note_task`) on its way out.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from lexrl.errors import EXIT_CODES
from lexrl.registry import ENTRY_POINT_GROUP
from lexrl.secrets import scrub, write_text

TRACEBACK_VARIABLE = "LEXRL_TRACEBACK"
"""Set to 1 to have an env error's traceback printed on stderr as well as written to its file."""
_TASK_ATTRIBUTE = "lexrl_task_id"


@dataclass(frozen=True)
class Plugin:
    """An installed env package: its distribution, version and the envs it registers."""

    distribution: str
    version: str
    envs: tuple[str, ...]

    def describe(self) -> str:
        names = ", ".join(repr(name) for name in self.envs)
        return f"env {names} of {self.distribution} {self.version}"


@cache
def plugin_modules() -> dict[str, Plugin]:
    """Top-level module -> the plugin that ships it, for every env entry point whose
    distribution is not lexrl. The module is the entry point's (`pkg.options:Cls` -> `pkg`)."""
    found: dict[str, tuple[str, str, list[str]]] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(entry_point, "dist", None)
        name = dist.name if dist is not None else "?"
        if name.lower() == "lexrl":
            continue
        top = entry_point.value.split(":")[0].strip().split(".")[0]
        if not top.isidentifier():
            continue
        version = dist.version if dist is not None else "?"
        envs = found.setdefault(top, (name, version, []))[2]
        if entry_point.name not in envs:
            envs.append(entry_point.name)
    return {top: Plugin(dist, version, tuple(envs)) for top, (dist, version, envs) in found.items()}


@dataclass(frozen=True)
class _Frame:
    module: str
    name: str
    lineno: int | None


def package_of(obj: object) -> str:
    """`distribution version` of the installed plugin whose module defines `obj`'s class, or
    `lexrl` for lexrl's own envs (and anything else)."""
    plugin = plugin_modules().get(type(obj).__module__.split(".")[0])
    return f"{plugin.distribution} {plugin.version}" if plugin is not None else "lexrl"


def _frames(error: BaseException) -> list[_Frame]:
    """Outermost first: `error`'s frames, then those of the exception it was raised from or
    during (raised deeper, inside the `try` that led to `error`), and so on."""
    frames: list[_Frame] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            module = tb.tb_frame.f_globals.get("__name__") or ""
            frames.append(_Frame(module, tb.tb_frame.f_code.co_name, tb.tb_lineno))
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
    return frames


@dataclass(frozen=True)
class Origin:
    """Where an exception left lexrl for a plugin's code."""

    plugin: Plugin
    call: str
    """The plugin function lexrl called (`run_episode`, `teacher`, ...), or the lambda's place."""
    caller: str
    """The lexrl function that called it; empty when the plugin's code was the entry itself."""


def plugin_origin(error: BaseException) -> Origin | None:
    """The plugin whose code raised `error`, with the last call lexrl made into it (a teacher's
    reply function called by lexrl's policy inside the plugin's episode is the teacher, not the
    episode); None when no frame of an installed plugin is in its traceback (a lexrl bug)."""
    modules = plugin_modules()
    origin = None
    caller, inside = "", None
    for frame in _frames(error) if modules else ():
        top = frame.module.split(".")[0]
        # The first entry into the plugin, then each later one lexrl itself made; a library the
        # plugin called calling back into it is still the same call.
        if top in modules and inside != top and (origin is None or inside == "lexrl"):
            call = (
                frame.name
                if frame.name != "<lambda>"
                else f"a lambda ({frame.module}, line {frame.lineno})"
            )
            origin = Origin(modules[top], call, caller)
        if top == "lexrl":
            caller = frame.name
        inside = top
    return origin


def note_task(error: BaseException, task_id: str) -> None:
    """Record the task an episode was playing when `error` escaped it (the innermost wins)."""
    if not hasattr(error, _TASK_ATTRIBUTE):
        # An exception type with __slots__ takes no attribute: its line goes without the task.
        with contextlib.suppress(AttributeError):
            setattr(error, _TASK_ATTRIBUTE, task_id)


def report_env_error(error: BaseException, origin: Origin) -> int:
    """Print the one `env error` line for `error`, raised in `origin`'s code, write its scrubbed
    traceback to a file (and stderr with `LEXRL_TRACEBACK=1`), and return the exit code."""
    text = "".join(traceback.format_exception(error))
    log = _write_traceback(scrub(text))
    if os.environ.get(TRACEBACK_VARIABLE) == "1":
        print(scrub(text), file=sys.stderr, end="")
    task = getattr(error, _TASK_ATTRIBUTE, None)
    where = f"{origin.plugin.describe()}, in {origin.call}"
    if origin.caller:
        where += f" (called by lexrl's {origin.caller})"
    if task is not None:
        where += f", task {task}"
    message = f"{type(error).__name__}: {error}".splitlines()[0]
    trace = f"its traceback (keys masked): {log}" if log else "its traceback could not be saved"
    print(
        scrub(
            f"env error: {where}: {message}; the error is in the env's code, not in lexrl: "
            f"{trace}; report it to the env's authors ({origin.plugin.distribution})"
        ),
        file=sys.stderr,
    )
    return EXIT_CODES["env"]


def _write_traceback(text: str) -> Path | None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(tempfile.gettempdir()) / f"lexrl-env-error-{stamp}-{os.getpid()}.txt"
    try:
        write_text(path, text)
        path.chmod(0o600)
    except OSError:
        return None
    return path
