"""`lexrl compare A B`: two evaluation reports side by side, with each metric's difference and
whether the two 95% intervals overlap (a first look at significance: intervals that do not
overlap differ at least at that level; overlapping ones may still differ)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def find_report(path: str | Path) -> Path:
    """The `eval_<split>_report.json` at `path`: the file itself, or the only one in the folder
    and its sub-folders (an evaluation folder, or a run with one evaluation)."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such report file or folder")
    found = sorted(path.rglob("eval_*_report.json"))
    if not found:
        raise FileNotFoundError(f"{path}: no eval_<split>_report.json in it (run `lexrl eval`)")
    if len(found) > 1:
        listed = "\n  ".join(str(p) for p in found)
        raise ValueError(f"{path} holds {len(found)} reports; name one:\n  {listed}")
    return found[0]


def report_sections(report: dict) -> dict[str, dict[str, dict[str, float]]]:
    """The episode means of a report by section (a mixture's envs; "" for a single env), each
    metric as {"mean", "low", "high"} (low = high = mean where the report has no interval)."""
    if "envs" in report:
        raw = {name: entry for name, entry in report["envs"].items() if "summary" in entry}
    elif "summary" in report:
        raw = {"": report}
    else:
        raise ValueError("the report has no episode means (an `eval.policy: false` run?)")
    sections = {}
    for name, entry in raw.items():
        intervals = entry.get("intervals", {})
        sections[name] = {
            key: intervals.get(key, {"mean": mean, "low": mean, "high": mean})
            for key, mean in entry["summary"].items()
        }
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


def compare_markdown(a: dict, b: dict, name_a: str, name_b: str) -> str:
    """A Markdown table per section (env) of the metrics of either report: A, B, B - A and
    whether the intervals overlap. A metric or env only one report has shows `-` on the other
    side."""
    sections_a, sections_b = report_sections(a), report_sections(b)
    lines = [f"# {name_b} vs {name_a}", ""]
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
    reports = []
    for file in (file_a, file_b):
        try:
            reports.append(json.loads(file.read_text(encoding="utf-8")))
        except json.JSONDecodeError as error:
            raise ValueError(f"{file}: not a JSON report ({error})") from None
    check_comparable(*reports, file_a, file_b)
    names = [_named(report, path) for report, path in zip(reports, (path_a, path_b), strict=True)]
    return compare_markdown(*reports, *names)


def _named(report: dict, path: str | Path) -> str:
    """The report's policy (`system`: a checkpoint, `base`, a served model's name) and path."""
    system = report.get("system")
    return f"{system} ({path})" if system else str(path)


def check_comparable(a: dict, b: dict, file_a: Path, file_b: Path) -> None:
    """ValueError, in one line naming both reports, when they evaluate different envs or
    splits: their metrics would share names (`reward`, `episodes`) and the table would show
    differences between numbers of different tasks. A report written before reports named
    their env (`env_name`) is checked on its split alone."""
    env_a, env_b = a.get("env_name"), b.get("env_name")
    if (env_a and env_b and env_a != env_b) or a.get("split") != b.get("split"):
        raise ValueError(
            f"{file_a} evaluates env {env_a or '?'} on split {a.get('split')}, {file_b} env "
            f"{env_b or '?'} on split {b.get('split')}: compare reports of the same env and split"
        )
