"""Reading dataset files (JSON, JSONL and the tables `datasets` reads) with errors that name the
file and line or row."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

TABLE_FORMATS = {
    ".parquet": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".csv": "csv",
    ".xlsx": "xlsx",
}


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


def missing_value(value: object) -> bool:
    """Whether a cell is empty: CSV and xlsx cells come back as NaN when empty, JSON fields as
    None."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def text_field(row: Mapping, key: str, where: str, required: bool = True) -> str | None:
    """`row[key]` as a non-blank string; DatasetError naming `where` and the key otherwise
    (None for a missing optional field)."""
    value = row.get(key)
    if missing_value(value) or (isinstance(value, str) and not value.strip()):
        if required:
            raise DatasetError(f"{where}: missing field `{key}`")
        return None
    if not isinstance(value, str):
        raise DatasetError(f"{where}: `{key}` is not a string: {value!r}")
    return value


def read_table(path: Path) -> Iterable[Mapping]:
    """The rows of a parquet, JSON/JSONL, CSV or xlsx file (a `datasets.Dataset`)."""
    import datasets
    import pandas as pd

    kind = TABLE_FORMATS.get(path.suffix)
    if kind is None:
        raise DatasetError(f"{path}: unsupported format; one of {', '.join(TABLE_FORMATS)}")
    try:
        if kind == "xlsx":
            # Cells as text: mixed-type columns would not fit one Arrow type, and the row
            # validation reads integers from text anyway.
            frame = pd.read_excel(path, engine="openpyxl", dtype=str)
            return datasets.Dataset.from_pandas(frame, preserve_index=False)
        return datasets.load_dataset(kind, data_files=str(path), split="train")
    except Exception as error:  # pyarrow, pandas and openpyxl raise many kinds for a bad file
        raise DatasetError(f"{path}: could not be read as {kind}: {error}") from error
