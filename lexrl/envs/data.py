"""Reading dataset files (JSON, JSONL and the tables `datasets` reads) with errors that name the
file and line or row."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from lexrl.errors import UNWRITABLE, CacheUnwritable, DatasetError

T = TypeVar("T")
S = TypeVar("S", bound=Sized)

TABLE_FORMATS = {
    ".parquet": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".csv": "csv",
    ".xlsx": "xlsx",
}


def unwritable_cache(error: BaseException) -> CacheUnwritable | None:
    """`datasets` writes every file it reads into its cache (`HF_DATASETS_CACHE`, by default
    `$HF_HOME/datasets`) first: a read-only or full cache is the machine's problem, not the
    dataset's, and the variable that moves the cache is the fix."""
    if not isinstance(error, OSError) or error.errno not in UNWRITABLE:
        return None
    where = f"{error.filename}: " if error.filename else ""
    return CacheUnwritable(
        f"the `datasets` cache cannot be written ({where}{error.strerror or error}); it caches "
        "every dataset file it reads: point HF_DATASETS_CACHE (or HF_HOME) at a writable folder "
        "with free space"
    )


_HUB_ID = re.compile(r"\w[\w.-]*(/\w[\w.-]*)?")
"""`name` or `owner/name`: what the Hub calls a dataset. Anything else is a path."""


def load_hub(source: str, *args: object, **kwargs: object) -> object:
    """`datasets.load_dataset(source, ...)` for a `source` that is no local file or folder.

    A source that can only be a path (absolute, starting with `.` or `~`, deeper than
    `owner/name`, or a file name of a data format) is never looked up on the Hub: a mistyped
    local path would otherwise fail as a network or Hub error. DatasetError names it and the
    formats read locally; it names both readings of `source` when the Hub has no such dataset
    or cannot be reached."""
    if not _HUB_ID.fullmatch(source) or Path(source).suffix in TABLE_FORMATS:
        raise DatasetError(
            f"dataset file not found: {source} (a local source is a file of "
            f"{', '.join(TABLE_FORMATS)} or a folder of them; a Hub source is `owner/name`)"
        )
    import datasets

    try:
        return datasets.load_dataset(source, *args, **kwargs)
    except OSError as error:
        if (cache := unwritable_cache(error)) is not None:
            raise cache from None
        if not isinstance(error, (FileNotFoundError, ConnectionError)):
            raise
        raise DatasetError(
            f"{source}: no local file or folder of that name, and no Hub dataset ({error})"
        ) from None


@contextmanager
def utf8(path: str | Path) -> Iterator[None]:
    """Turn a UnicodeDecodeError met while reading `path` into a DatasetError naming
    `path:line` and the byte, as the JSON errors name their line. The decoder's offset is into
    its buffer, not the file, so the lines are decoded anew; a newline is never part of a UTF-8
    sequence, so the first line that fails holds the first bad byte."""
    try:
        yield
    except UnicodeDecodeError:
        for number, line in enumerate(Path(path).read_bytes().split(b"\n"), start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DatasetError(
                    f"{path}:{number}: not UTF-8 (byte 0x{line[error.start]:02x} at column "
                    f"{error.start + 1}); save the file as UTF-8"
                ) from None
        raise


def require_file(path: str | Path) -> Path:
    """`path` when it is a file; DatasetError saying what it is otherwise (missing, or a folder,
    whose files are named so the right one can be given)."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(child.name for child in path.iterdir() if child.is_file())[:5]
        listed = f" (it holds {', '.join(inside)})" if inside else " (an empty one)"
        raise DatasetError(f"{path} is a folder, not a dataset file{listed}: give the file")
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    return path


def read_json(path: str | Path, unique_keys: bool = False) -> object:
    """A whole JSON file; a syntax error raises DatasetError naming `path:line`. With
    `unique_keys`, so does a key that repeats within an object (JSON keeps the last silently:
    for a file keyed by id, a repeated id would drop an item unseen)."""
    path = require_file(path)

    def unique(pairs: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in pairs]
        repeated = next((key for key in keys if keys.count(key) > 1), None)
        if repeated is not None:
            raise DatasetError(f"{path}: key {repeated!r} appears twice in one object")
        return dict(pairs)

    try:
        with utf8(path):
            text = path.read_text(encoding="utf-8")
        return json.loads(text, object_pairs_hook=unique if unique_keys else None)
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None


def read_jsonl(
    path: str | Path, required: tuple[str, ...] = (), unique: str | None = None
) -> Iterator[dict]:
    """The records of `read_jsonl_lines`, without their line numbers."""
    return (record for _, record in read_jsonl_lines(path, required, unique))


def read_jsonl_lines(
    path: str | Path, required: tuple[str, ...] = (), unique: str | None = None
) -> Iterator[tuple[int, dict]]:
    """Yield (line number, dict) per non-blank line; a bad line raises DatasetError naming
    `path:line`. With `unique` (a key, e.g. "id"), so does a value of it that an earlier line
    had, naming both lines (`check_unique`)."""
    path = require_file(path)
    seen: dict[Hashable, str] = {}
    with utf8(path), path.open(encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                # JSONDecodeError, or an integer longer than Python converts (4,300 digits).
                reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
                raise DatasetError(f"{path}:{number}: not valid JSON ({reason})") from None
            if not isinstance(record, dict):
                raise DatasetError(
                    f"{path}:{number}: expected a JSON object, got {type(record).__name__}"
                )
            missing = [key for key in required if key not in record]
            if missing:
                raise DatasetError(f"{path}:{number}: missing key(s) {', '.join(missing)}")
            if unique is not None:
                check_unique([(_hashable(record.get(unique)), f"{path}:{number}")], unique, seen)
            yield number, record


def _hashable(value: object) -> Hashable:
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def check_unique(
    items: Iterable[tuple[Hashable, str]], what: str = "id", seen: dict | None = None
) -> None:
    """DatasetError at the first (value, where) of `items` whose value came before, naming
    where it did (`where`: `file:line`, `file row N`, ...); `seen` carries the values met so
    far across calls."""
    seen = {} if seen is None else seen
    for value, where in items:
        if value in seen:
            raise DatasetError(f"{where}: {what} {value!r} repeats {seen[value]}")
        seen[value] = where


def require_some(items: S, what: str, source: str | Path) -> S:
    """`items`, or DatasetError `no <what> in <source>` when there are none: an empty split
    would otherwise fail far from its file (a division by its length)."""
    if not items:
        raise DatasetError(f"no {what} in {source}")
    return items


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


def check_json_rows(path: Path) -> None:
    """DatasetError naming the line of a JSON or JSON Lines file's row that is no object, before
    `datasets` reads it: its JSON reader kills the process (a pyarrow segfault) on a first row
    `null`."""
    with utf8(path):
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError:
        list(read_jsonl_lines(path))
        return
    rows = data if isinstance(data, list) else [data]
    if not all(isinstance(row, dict) for row in rows):
        raise DatasetError(f"{path}: expected JSON objects, one a line or in a list")


def read_table(path: Path) -> Iterable[Mapping]:
    """The rows of a parquet, JSON/JSONL, CSV or xlsx file (a `datasets.Dataset`)."""
    import datasets
    import pandas as pd

    kind = TABLE_FORMATS.get(path.suffix)
    if kind is None:
        raise DatasetError(f"{path}: unsupported format; one of {', '.join(TABLE_FORMATS)}")
    if kind == "json":
        check_json_rows(path)
    try:
        if kind == "xlsx":
            # Cells as text: mixed-type columns would not fit one Arrow type, and the row
            # validation reads integers from text anyway.
            frame = pd.read_excel(path, engine="openpyxl", dtype=str)
            table = datasets.Dataset.from_pandas(frame, preserve_index=False)
        else:
            table = datasets.load_dataset(kind, data_files=str(path), split="train")
        # Arrow fails on some structs (keys holding NUL) only when rows are converted: here.
        table.to_list()
        return table
    except Exception as error:  # pyarrow, pandas and openpyxl raise many kinds for a bad file
        if (cache := unwritable_cache(error)) is not None:
            raise cache from None
        raise DatasetError(f"{path}: could not be read as {kind}: {error}") from error


def split_by_group(
    items: Sequence[T],
    group: Callable[[T], Hashable],
    eval_fraction: float,
    seed: int,
    max_eval_fraction: float = 0.5,
) -> dict[str, list[T]]:
    """{"train", "test"} with every group (`group(item)`: a course, a fact pattern, a case)
    wholly on one side, so questions that share their facts never straddle the split.

    The sorted group names are shuffled with `seed`; whole groups go to test, in that order,
    until test holds at least `eval_fraction` of the items. A group that would take test past
    `max_eval_fraction` stays in train: one dominant group would otherwise become the test set
    and leave almost nothing to train on (test can then hold less than `eval_fraction`, and the
    split may not depend on the seed). Within a side, items keep their input order.
    """
    if not 0 < eval_fraction <= max_eval_fraction < 1:
        raise ValueError(
            "need 0 < eval_fraction <= max_eval_fraction < 1, got "
            f"eval_fraction={eval_fraction}, max_eval_fraction={max_eval_fraction}"
        )
    sizes: dict[Hashable, int] = {}
    for item in items:
        sizes[group(item)] = sizes.get(group(item), 0) + 1
    order = sorted(sizes, key=str)
    random.Random(seed).shuffle(order)
    held, test = 0, set()
    for name in order:
        if held >= eval_fraction * len(items):
            break
        if held + sizes[name] <= max_eval_fraction * len(items):
            test.add(name)
            held += sizes[name]
    return {
        "train": [item for item in items if group(item) not in test],
        "test": [item for item in items if group(item) in test],
    }
