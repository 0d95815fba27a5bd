"""`lexrl compare A B`: two evaluation reports side by side, with each metric's difference and
whether the two 95% intervals overlap (a first look at significance: intervals that do not
overlap differ at least at that level; overlapping ones may still differ)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from lexrl.errors import ConfigError, LexrlError


class ReportError(LexrlError, ValueError):
    """A report file is missing, unreadable or not an evaluation report; the message names it
    and the key."""

    kind = "data"


def find_report(path: str | Path) -> Path:
    """The `eval_<split>_report.json` at `path`: the file itself, or the only one in the folder
    and its sub-folders (an evaluation folder, or a run with one evaluation). A folder with
    several is a ConfigError listing them."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise ReportError(f"{path}: no such report file or folder")
    found = sorted(path.rglob("eval_*_report.json"))
    if not found:
        raise ReportError(f"{path}: no eval_<split>_report.json in it (run `lexrl eval`)")
    if len(found) > 1:
        listed = ", ".join(str(p) for p in found)
        raise ConfigError(f"{path} holds {len(found)} reports; name one: {listed}")
    return found[0]


def read_report(file: Path) -> dict:
    """The JSON object in `file`; ReportError naming it when it cannot be read, is not UTF-8
    JSON, or holds something else than an object."""
    try:
        report = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise ReportError(f"{file}: cannot be read ({error.strerror})") from None
    except UnicodeDecodeError as error:
        raise ReportError(f"{file}: not a JSON report (not UTF-8: {error.reason})") from None
    except ValueError as error:
        # JSONDecodeError, or an integer longer than Python converts (4,300 digits).
        raise ReportError(f"{file}: not a JSON report ({error})") from None
    except RecursionError:
        raise ReportError(f"{file}: not a JSON report (nested too deeply)") from None
    if not isinstance(report, dict):
        raise ReportError(
            f"{file}: not an evaluation report (a JSON {type(report).__name__}, not an object "
            "with `summary` or `envs`)"
        )
    return report


def _number(value: object, source: str, key: str) -> float:
    # bool is an int to Python, never a metric to a report.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(f"{source}: `{key}` is {json.dumps(value)[:60]}, not a number")
    try:
        return float(value)
    except OverflowError:
        raise ReportError(f"{source}: `{key}` is too large for a float") from None


def _mapping(value: object, source: str, key: str) -> dict:
    if not isinstance(value, dict):
        raise ReportError(f"{source}: `{key}` is {json.dumps(value)[:60]}, not an object")
    return value


def _interval(value: object, source: str, key: str) -> dict[str, float]:
    interval = _mapping(value, source, key)
    missing = [name for name in ("mean", "low", "high") if name not in interval]
    if missing:
        raise ReportError(f"{source}: `{key}` lacks {', '.join(missing)}")
    return {name: _number(interval[name], source, f"{key}.{name}") for name in interval}


def _section(entry: dict, source: str, prefix: str) -> dict[str, dict[str, float]]:
    """One section's metrics, each {"mean", "low", "high"} (low = high = mean without an
    interval); ReportError naming `source` and the key of a value of the wrong shape."""
    summary = _mapping(entry["summary"], source, f"{prefix}summary")
    intervals = _mapping(entry.get("intervals", {}), source, f"{prefix}intervals")
    metrics = {}
    for key, value in summary.items():
        mean = _number(value, source, f"{prefix}summary.{key}")
        interval = intervals.get(key)
        metrics[key] = (
            {"mean": mean, "low": mean, "high": mean}
            if interval is None
            else _interval(interval, source, f"{prefix}intervals.{key}")
        )
    return metrics


def report_sections(
    report: dict, source: str = "the report"
) -> dict[str, dict[str, dict[str, float]]]:
    """The episode means of a report by section (a mixture's envs; "" for a single env), each
    metric as {"mean", "low", "high"} (low = high = mean where the report has no interval).
    A value of the wrong shape is a ReportError naming `source` and its key."""
    sections = {}
    if "envs" in report:
        envs = _mapping(report["envs"], source, "envs")
        sections = {
            name: _section(entry, source, f"envs.{name}.")
            for name, entry in envs.items()
            if "summary" in _mapping(entry, source, f"envs.{name}")
        }
    elif "summary" in report:
        sections = {"": _section(report, source, "")}
    if not sections:
        raise ReportError(f"{source} has no episode means (an `eval.policy: false` run?)")
    return sections


def overlap(a: dict[str, float], b: dict[str, float]) -> bool | None:
    """Whether two intervals overlap; None when either has no width (no interval to compare)."""
    if a["low"] == a["high"] or b["low"] == b["high"]:
        return None
    return a["low"] <= b["high"] and b["low"] <= a["high"]


def _cell(value: dict[str, float] | None) -> str:
    if value is None:
        return "-"
    text = f"{value['mean']:.4f}"
    if value["low"] != value["high"]:
        text += f" [{value['low']:.3f}, {value['high']:.3f}]"
    return text


def compare_markdown(a: dict, b: dict, name_a: str, name_b: str, note: str = "") -> str:
    """A Markdown table per section (env) of the metrics of either report: A, B, B - A and
    whether the intervals overlap, under the title and `note`. A metric or env only one report
    has shows `-` on the other side."""
    sections_a, sections_b = report_sections(a, name_a), report_sections(b, name_b)
    lines = [f"# {name_b} vs {name_a}", ""] + ([note, ""] if note else [])
    for section in dict.fromkeys([*sections_a, *sections_b]):
        metrics_a, metrics_b = sections_a.get(section, {}), sections_b.get(section, {})
        if section:
            lines += [f"## {section}", ""]
        lines += [
            f"| metric | A: {name_a} | B: {name_b} | B - A | intervals overlap |",
            "|---|---|---|---|---|",
        ]
        for key in dict.fromkeys([*metrics_a, *metrics_b]):
            value_a, value_b = metrics_a.get(key), metrics_b.get(key)
            difference, overlapping = "-", "-"
            if value_a is not None and value_b is not None:
                delta = value_b["mean"] - value_a["mean"]
                difference = "nan" if math.isnan(delta) else f"{delta:+.4f}"
                verdict = overlap(value_a, value_b)
                overlapping = "-" if verdict is None else ("yes" if verdict else "**no**")
            lines.append(
                f"| {key} | {_cell(value_a)} | {_cell(value_b)} | {difference} | {overlapping} |"
            )
        lines.append("")
    return "\n".join(lines)


def compare_reports(path_a: str | Path, path_b: str | Path) -> str:
    """The comparison of the reports at `path_a` and `path_b` (`find_report`) as Markdown."""
    file_a, file_b = find_report(path_a), find_report(path_b)
    reports = [read_report(file_a), read_report(file_b)]
    for report, file in zip(reports, (file_a, file_b), strict=True):
        report_sections(report, str(file))
    check_comparable(*reports, file_a, file_b)
    names = [_named(report, path) for report, path in zip(reports, (path_a, path_b), strict=True)]
    note = ""
    if file_a.resolve() == file_b.resolve():
        note = f"Note: A and B are the same report ({file_a}); there is nothing to compare."
    return compare_markdown(*reports, *names, note)


def _named(report: dict, path: str | Path) -> str:
    """The report's policy (`system`: a checkpoint, `base`, a served model's name) and path."""
    system = report.get("system")
    return f"{system} ({path})" if system else str(path)


def check_comparable(a: dict, b: dict, file_a: Path, file_b: Path) -> None:
    """ConfigError, in one line naming both reports, when they evaluate different envs or
    splits: their metrics would share names (`reward`, `episodes`) and the table would show
    differences between numbers of different tasks. A report written before reports named
    their env (`env_name`) is checked on its split alone."""
    env_a, env_b = a.get("env_name"), b.get("env_name")
    if (env_a and env_b and env_a != env_b) or a.get("split") != b.get("split"):
        raise ConfigError(
            f"{file_a} evaluates env {env_a or '?'} on split {a.get('split')}, {file_b} env "
            f"{env_b or '?'} on split {b.get('split')}: compare reports of the same env and split"
        )
