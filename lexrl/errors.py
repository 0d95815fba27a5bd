"""The errors lexrl anticipates, each with the exit code `lexrl` ends with.

Every error a user can cause or meet (a config value, a data file, a model, an endpoint, a
checkpoint, a held run folder, a run that cannot score) derives from `LexrlError`. The CLI
prints it as one line, `<kind> error: <message>`, and exits with its code; anything else that
escapes is a lexrl bug and prints its traceback with a line saying so. This module imports
nothing of lexrl, so every layer may raise these.
"""

from __future__ import annotations

import errno
from pathlib import Path

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
    "env": 10,
}
"""Exit code of each kind of error (`lexrl --help` and docs/faults.md list them). 1 is a lexrl
bug (a traceback), 130 an interrupt, 143 a SIGTERM. `env` is an exception raised in an installed
env plugin's own code (`lexrl.plugin_errors`): it names the plugin, never lexrl."""


class ConfigError(LexrlError, ValueError):
    """A config file or value is malformed or inconsistent; the message names the file and the
    key. (`lexrl.config.ConfigError` is this class.)"""

    kind = "config"


class EnvContractError(LexrlError):
    """An env broke the env contract in a way that stops a run (a reward component it reports
    but does not declare); the message names the env and its package."""

    kind = "env"


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


class DatasetError(LexrlError, ValueError):
    """A dataset file is missing or malformed; the message names the file and line."""

    kind = "data"


class ScenarioError(DatasetError):
    """A scenario file line is malformed; the message names the file, the line and the field."""


class ReportError(LexrlError, ValueError):
    """A report file is missing, unreadable or not an evaluation report; the message names it
    and the key."""

    kind = "data"


class EndpointError(LexrlError, RuntimeError):
    """A served model failed after the retries; the message names the URL and the reply."""

    kind = "endpoint"


class EpisodeCallFailed(LexrlError, RuntimeError):
    """A policy call that failed after the client's retries (a remote endpoint down or
    answering errors): it costs its episode, which the engine records as failed, not the run."""

    kind = "endpoint"


class ModelUnavailable(LexrlError, RuntimeError):
    """A configured model is neither a local folder nor reachable on the Hub (one-line message)."""

    kind = "model"


class PlanError(LexrlError, ValueError):
    """The plan cannot be made (unknown model shape, unreadable trajectories)."""

    kind = "plan"


class RunFolderError(LexrlError):
    """`run.output_dir` cannot hold a run's files: it is a file, lies under one, or cannot be
    created or written."""

    kind = "run folder"


class RunFolderTaken(LexrlError):
    """`run.output_dir` holds another run's checkpoints or logged steps and this run does not
    resume it; the message names the folder, what it holds and both ways on."""

    kind = "run folder"


class PartialOfOtherSettings(LexrlError):
    """A `PARTIAL_FILE` was written under other settings than the evaluation asked for now."""

    kind = "run folder"


class CheckpointNotWritten(CheckpointError, OSError):
    """A checkpoint write that failed. Still an `OSError` with the errno of the cause, for the
    callers that tell a full disk from other failures."""

    def __str__(self) -> str:
        # OSError's own str prefixes "[Errno N] ", noise in the CLI's one-line message.
        return str(self.strerror)


class DamagedCheckpoint(CheckpointError):
    """A checkpoint whose files do not match its manifest (or that has none). `reason` names the
    file and what is wrong with it, for a `skipped <checkpoint>: <reason>` line."""

    def __init__(self, checkpoint: Path, reason: str) -> None:
        self.checkpoint = Path(checkpoint)
        self.reason = reason
        super().__init__(
            f"checkpoint {checkpoint} is damaged: {reason}; use an earlier checkpoint "
            "(`--run.resume true` skips damaged ones by itself)"
        )


class Interrupted(LexrlError):
    """SIGTERM or SIGINT stopped a command at a point it can say more about than "interrupted".
    Exits 128 + the signal's number, as a process the signal had killed would (130 for SIGINT,
    143 for SIGTERM)."""

    kind = "run"

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class EvaluationInterrupted(Interrupted):
    """SIGTERM or SIGINT stopped an evaluation; what it had evaluated is in its `PARTIAL_FILE`,
    and the same command continues from there."""


class WarmstartInterrupted(Interrupted):
    """SIGTERM or SIGINT stopped the teacher's episodes before the warm-start's SFT; the same
    command plays them again and continues from the SFT progress saved earlier."""


class EvaluationFailed(LexrlError):
    """Too many episodes of an evaluation failed for its means to stand for the policy
    (`eval.max_failed_share`); its report is written, with the failed count beside every mean."""

    kind = "run"
