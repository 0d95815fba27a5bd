"""The errors lexrl anticipates, each with the exit code `lexrl` ends with.

Every error a user can cause or meet (a config value, a data file, a model, an endpoint, a
checkpoint, a held run folder, a run that cannot score) derives from `LexrlError`. The CLI
prints it as one line, `<kind> error: <message>`, and exits with its code; anything else that
escapes is a lexrl bug and prints its traceback with a line saying so. This module imports
nothing of lexrl, so every layer may raise these.
"""

from __future__ import annotations

import errno

DISK_FULL = frozenset({errno.ENOSPC, errno.EFBIG, errno.EROFS, errno.EDQUOT})
"""A write that fails with one of these failed for want of room or permission on the disk, never
for a lexrl bug, wherever the writer (a log, a report, a cache) does not say so itself."""
UNWRITABLE = DISK_FULL | {errno.EACCES, errno.EPERM}
"""A cache that fails with one of these cannot be written at all: full, read-only or not ours."""


def bug_report_address() -> str:
    """Where to report a lexrl bug: the installed package's `Issues` (or `Bug Tracker`) project
    URL from its metadata (`[project.urls]`), else a line saying what to include, so a fork or
    a mirror never sends its users to an address that is not its own."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        urls = metadata("lexrl").get_all("Project-URL") or []
    except PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("issues", "bug tracker"):
            return f"at {url.strip()}"
    return "to the issue tracker of the lexrl you installed, with its version (`pip show lexrl`)"


class LexrlError(Exception):
    """An anticipated failure; its message names the file, line, key or URL and what to do.
    Subclasses set `kind` (a key of `EXIT_CODES`) and may also derive from a builtin error
    (`class DatasetError(LexrlError, ValueError)`) so existing `except ValueError` still hold."""

    kind = "run"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.kind]


EXIT_CODES = {
    "config": 2,
    "data": 3,
    "model": 4,
    "endpoint": 5,
    "checkpoint": 6,
    "run folder": 7,
    "plan": 8,
    "run": 9,
}
"""Exit code of each kind of error (`lexrl --help` and docs/faults.md list them). 1 is a lexrl
bug (a traceback), 130 an interrupt, 143 a SIGTERM."""


class ConfigError(LexrlError, ValueError):
    """A config file or value is malformed or inconsistent; the message names the file and the
    key. (`lexrl.config.ConfigError` is this class.)"""

    kind = "config"


class CheckpointError(LexrlError):
    """A checkpoint is incomplete, damaged or cannot be written; the message names the file."""

    kind = "checkpoint"


class RunFolderLocked(LexrlError):
    """Another live run holds `run.output_dir`; the message names its host, PID and start."""

    kind = "run folder"


class CacheUnwritable(LexrlError):
    """A library cache lexrl does not choose the place of (`datasets` under `HF_HOME`) cannot
    be written; the message names the folder and the variable that moves it."""

    kind = "run folder"


class RunHalted(LexrlError):
    """A run stopped because it could not go on usefully (every episode failing for
    `run.max_failed_steps` steps); its last checkpoint is written."""

    kind = "run"
