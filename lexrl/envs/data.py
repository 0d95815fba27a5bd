"""Reading dataset files with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


class DatasetError(ValueError):
    """A dataset file is missing or malformed; the message names the file and line."""


def read_json(path: str | Path) -> object:
    """A whole JSON file; a syntax error raises DatasetError naming `path:line`."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


def read_jsonl(path: str | Path, required: tuple[str, ...] = ()) -> Iterator[dict]:
    """Yield one dict per non-blank line; a bad line raises DatasetError naming `path:line`."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    with path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise DatasetError(
                    f"{path}:{number}: expected a JSON object, got {type(record).__name__}"
                )
            missing = [key for key in required if key not in record]
            if missing:
                raise DatasetError(f"{path}:{number}: missing key(s) {', '.join(missing)}")
            yield record
