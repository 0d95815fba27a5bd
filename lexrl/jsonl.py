"""Reading a JSONL file that lexrl appends to (`metrics.jsonl`, `samples.jsonl`, an evaluation's
`partial.jsonl`) after a run that may have been killed while appending.

A kill (SIGKILL, OOM, a node lost) can cut the file anywhere in its last line: mid-JSON, or inside
a UTF-8 character. That line is dropped with a warning and the file is cut back to the lines
before it, so the next append starts a line of its own instead of gluing onto the torn one. A
line that cannot be read anywhere else was not left by a kill but damaged otherwise: that is a
`DatasetError` naming `file:line`, as guessing which records to keep could silently lose them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from lexrl.errors import DatasetError

T = TypeVar("T")

SHAPE_ERRORS = (ValueError, TypeError, KeyError)
"""What a `parse` function raises for valid JSON of the wrong shape."""


def read_appended(path: Path, parse: Callable[[Any], T]) -> list[tuple[str, T]]:
    """Each line of `path` (none when it does not exist) with what `parse` makes of its JSON
    value; `parse` raises one of `SHAPE_ERRORS` for a value of the wrong shape (a list, a string,
    an object without its keys). A last line that cannot be read is dropped, the file cut before
    it; any other raises `DatasetError`."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    records: list[tuple[str, T]] = []
    for number, line in enumerate(raw, start=1):
        try:
            text = line.decode("utf-8")
            records.append((text, parse(json.loads(text))))
        except UnicodeDecodeError as error:
            _unreadable(path, number, len(raw), f"not UTF-8 at byte {error.start + 1}")
        except json.JSONDecodeError as error:
            _unreadable(path, number, len(raw), f"not JSON: {error.msg} at column {error.colno}")
        except SHAPE_ERRORS as error:
            _unreadable(path, number, len(raw), f"not a record of this file: {error!r}")
    if len(records) < len(raw):
        os.truncate(path, len(b"".join(line + b"\n" for line in raw[:-1])))
    elif data and not data.endswith(b"\n"):
        # A whole record cut just before its newline: the next append must not glue onto it.
        with path.open("ab") as file:
            file.write(b"\n")
    return records


def step_record(record: object) -> dict[str, Any]:
    """A record of a run's `metrics.jsonl` or `samples.jsonl`, which starts with its integer
    `step`; ValueError for another shape."""
    step = record.get("step") if isinstance(record, dict) else None
    if not isinstance(step, int) or isinstance(step, bool):
        raise ValueError(f"an object with an integer `step` expected, got {str(record)[:80]}")
    return record


def _unreadable(path: Path, number: int, lines: int, reason: str) -> None:
    if number < lines:
        raise DatasetError(
            f"{path}:{number} cannot be read ({reason}); a kill cuts only the last line, so this "
            "one was damaged otherwise: repair or remove that line, or move the file away, "
            "then run again"
        )
    print(
        f"warning: {path}:{number}: dropped its last line, cut by a kill while it was written "
        f"({reason})",
        file=sys.stderr,
    )
