"""`lexrl envs --stats` as a table: an env's nested statistics (`Env.stats`) flattened to one row
per number, keyed by its dotted path (`test.input_chars.mean`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def flat_rows(stats: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, printed value) for each leaf of `stats`: dicts are walked, a list of plain
    values is one comma-separated cell, a float is printed with 3 decimals."""
    if isinstance(stats, dict):
        for key, value in stats.items():
            yield from flat_rows(value, f"{prefix}{key}.")
        return
    key = prefix.rstrip(".") or "value"
    if isinstance(stats, list) and all(not isinstance(item, dict | list) for item in stats):
        yield key, ", ".join(str(item) for item in stats)
    elif isinstance(stats, list):
        for index, item in enumerate(stats):
            yield from flat_rows(item, f"{prefix}{index}.")
    elif isinstance(stats, float):
        yield key, f"{stats:.3f}"
    else:
        yield key, str(stats)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(stats_by_env: dict[str, Any]) -> str:
    """A Markdown table of each env's statistics, a row per number: `| env | statistic | value |`."""
    lines = ["| env | statistic | value |", "|---|---|---:|"]
    for env, stats in stats_by_env.items():
        lines += [f"| {env} | {_cell(k)} | {_cell(v)} |" for k, v in flat_rows(stats)]
    return "\n".join(lines)
