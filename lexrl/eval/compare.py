"""`lexrl compare A B [C ...]`: two evaluation reports side by side, with each metric's
difference and whether the two 95% intervals overlap (a first look at significance: intervals
that do not overlap differ at least at that level; overlapping ones may still differ); more
reports as a leaderboard. Reports are compared only when they cover the same tasks with the
same samples per task (`check_tasks`): means over other tasks differ for that alone."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lexrl.errors import ConfigError, ReportError


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
    whether the intervals overlap, under the title "A vs B" (in the order given) and `note`. A
    metric or env only one report has shows `-` on the other side."""
    sections_a, sections_b = report_sections(a, name_a), report_sections(b, name_b)
    lines = [f"# {name_a} vs {name_b}", ""] + ([note, ""] if note else [])
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


def compare_reports(paths: Sequence[str | Path], allow_different_tasks: bool = False) -> str:
    """The reports at `paths` (`find_report`; two or more) as Markdown: two side by side
    (`compare_markdown`), more as a leaderboard (`leaderboard_markdown`). Reports of different
    envs or splits are a ConfigError (`check_comparable`); reports of different tasks or samples
    per task a ReportError, unless `allow_different_tasks`, when a warning block opens the
    output (`check_tasks`). Reports that do not say which tasks they cover are compared under a
    warning line."""
    if len(paths) < 2:
        raise ConfigError(f"compare: give two or more reports, not {len(paths)}")
    files = [find_report(path) for path in paths]
    repeats = []
    if len(paths) > 2:
        paths, files, repeats = _without_repeats(paths, files)
        if len(paths) < 2:
            raise ConfigError(f"compare: {paths[0]} is every report given; nothing to compare")
    reports = [read_report(file) for file in files]
    for report, file in zip(reports, files, strict=True):
        report_sections(report, str(file))
    for report, file in zip(reports[1:], files[1:], strict=True):
        check_comparable(reports[0], report, files[0], file)
    coverages = [report_tasks(report, file) for report, file in zip(reports, files, strict=True)]
    warnings = repeats + check_tasks(coverages, files, allow_different_tasks)
    if len(paths) > 2:
        return leaderboard_markdown(reports, [str(path) for path in paths], coverages, warnings)
    names = [_named(report, path) for report, path in zip(reports, paths, strict=True)]
    if files[0].resolve() == files[1].resolve():
        # The same file covers the same tasks; its task warnings would only be noise.
        warnings = [f"Note: A and B are the same report ({files[0]}); there is nothing to compare."]
    # A blank line between warnings: consecutive `>` lines would render as one paragraph.
    return compare_markdown(*reports, *names, "\n\n".join(warnings))


def _without_repeats(
    paths: Sequence[str | Path], files: list[Path]
) -> tuple[list[str | Path], list[Path], list[str]]:
    """`paths` and their report `files` with each report kept where it is first given, and a
    note for each one given again (a leaderboard lists a report once)."""
    kept: dict[Path, tuple[str | Path, Path]] = {}
    notes = []
    for path, file in zip(paths, files, strict=True):
        if file.resolve() in kept:
            notes.append(f"Note: {path} is the report of {kept[file.resolve()][0]}: listed once.")
        else:
            kept[file.resolve()] = (path, file)
    return [p for p, _ in kept.values()], [f for _, f in kept.values()], notes


@dataclass(frozen=True)
class Tasks:
    """Which tasks a report covers: `ids` (str, as the per-task JSONL writes them: a mixture's
    prefixed by their env) or None where unknown, `count` (the report's `tasks`) or None,
    `samples` per task or None, and `unknown`, why the ids are unknown ("" when known)."""

    ids: frozenset[str] | None
    count: int | None
    samples: int | None
    unknown: str = ""


def report_tasks(report: dict, file: Path) -> Tasks:
    """The tasks `report` (read from `file`) covers: its `task_ids` and `samples_per_task` where
    it has them, else read from the per-task JSONL beside it (`eval_<split>.jsonl`, which
    `lexrl eval` writes next to `eval_<split>_report.json`). A value of the wrong shape in the
    report is a ReportError naming `file` and the key; an unreadable JSONL only leaves the ids
    unknown, with the reason."""
    ids = _string_list(report.get("task_ids"), str(file), "task_ids")
    count = _count(report.get("tasks"), str(file), "tasks", 0)
    samples = _count(report.get("samples_per_task"), str(file), "samples_per_task", 1)
    unknown = ""
    if ids is None or samples is None:
        jsonl = per_task_file(file)
        found = (
            _jsonl_tasks(jsonl)
            if jsonl is not None
            else "is not named eval_<split>_report.json, so has no per-task JSONL"
        )
        if not isinstance(found, str) and ids is None and count not in (None, len(found[0])):
            # A JSONL of another evaluation (copied beside it) would check the wrong tasks.
            found = f"its {jsonl.name} holds {len(found[0])} tasks, not the report's {count}"
        if isinstance(found, str):
            unknown = f"{file} lists no task ids and {found}" if ids is None else ""
        else:
            ids = ids if ids is not None else found[0]
            samples = samples if samples is not None else found[1]
    return Tasks(ids, count, samples, unknown)


def per_task_file(file: Path) -> Path | None:
    """`eval_<split>.jsonl` beside `eval_<split>_report.json`; None for a report named
    otherwise (its split is not in its name)."""
    match = re.fullmatch(r"eval_(.+)_report\.json", file.name)
    return file.with_name(f"eval_{match.group(1)}.jsonl") if match else None


def _jsonl_tasks(path: Path) -> tuple[frozenset[str], int | None] | str:
    """The task ids in the per-task JSONL at `path` and its samples per task (None when its
    tasks have different numbers of episodes); or, where it cannot tell, why: a phrase that
    follows "<report> lists no task ids and"."""
    ids, samples = set(), set()
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                record = _json_or_none(line)
                task = record.get("task") if isinstance(record, dict) else None
                if not (isinstance(task, dict) and isinstance(task.get("id"), str)):
                    return f"line {number} of its {path.name} is not a task record"
                ids.add(task["id"])
                if isinstance(record.get("trajectories"), list):
                    samples.add(len(record["trajectories"]))
    except FileNotFoundError:
        return f"has no {path.name} beside it"
    except (OSError, UnicodeDecodeError) as error:
        return f"its {path.name} cannot be read ({getattr(error, 'strerror', None) or error})"
    if not ids:
        return f"its {path.name} holds no tasks"
    return frozenset(ids), (samples.pop() if len(samples) == 1 else None)


def _json_or_none(line: str) -> object:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _string_list(value: object, source: str, key: str) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ReportError(f"{source}: `{key}` is {json.dumps(value)[:60]}, not a list of ids")
    return frozenset(value)


def _count(value: object, source: str, key: str, least: int) -> int | None:
    # None is what a report without policy episodes writes for `samples_per_task`.
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ReportError(f"{source}: `{key}` is {json.dumps(value)[:60]}, not a count")
    return value


def task_difference(a: Tasks, b: Tasks) -> str | None:
    """How the tasks of A and B differ, a phrase ("1 task only in A, 0 only in B, samples per
    task 4 in A and 4 in B"); None when they cover the same tasks as far as both say (ids where
    both have them, else task counts) with the same samples per task."""
    if a.ids is not None and b.ids is not None:
        only_a, only_b = len(a.ids - b.ids), len(b.ids - a.ids)
        tasks = f"{_tasks(only_a)} only in A, {only_b} only in B"
        differ = bool(only_a or only_b)
    else:
        tasks = f"{_tasks(a.count)} in A, {_or_unknown(b.count)} in B"
        differ = a.count is not None and b.count is not None and a.count != b.count
    if a.samples is not None and b.samples is not None and a.samples != b.samples:
        differ = True
    samples = f"samples per task {_or_unknown(a.samples)} in A and {_or_unknown(b.samples)} in B"
    return f"{tasks}, {samples}" if differ else None


def _tasks(count: int | None) -> str:
    return f"{_or_unknown(count)} task{'' if count == 1 else 's'}"


def _or_unknown(value: int | None) -> str:
    return "?" if value is None else str(value)


def check_tasks(coverages: list[Tasks], files: list[Path], allow: bool = False) -> list[str]:
    """Markdown warning lines for the reports' task coverage (`report_tasks`), each compared
    with the first's (A): a `**Different tasks:**` line per report whose tasks or samples per
    task differ (a ReportError naming both files and `--allow-different-tasks` instead, unless
    `allow`), and a `**Tasks not checked:**` line per report whose task ids are unknown."""
    warnings = []
    for coverage, file in zip(coverages[1:], files[1:], strict=True):
        difference = task_difference(coverages[0], coverage)
        if difference is None:
            continue
        if not allow:
            raise ReportError(
                f"{files[0]} (A) and {file} (B) evaluate different tasks: {difference}; "
                "compare reports of the same tasks, or pass --allow-different-tasks"
            )
        warnings.append(
            f"> **Different tasks:** {file} (B) against {files[0]} (A): {difference}; "
            "their means are over different tasks."
        )
    for coverage in coverages:
        if coverage.unknown:
            warnings.append(
                f"> **Tasks not checked:** {coverage.unknown}; the reports may cover different "
                "tasks."
            )
    return warnings


def leaderboard_markdown(
    reports: list[dict], names: list[str], coverages: list[Tasks], warnings: list[str]
) -> str:
    """A Markdown leaderboard of `reports` (named by their paths, `names`): a row per report
    with its policy (`system`), its score with the 95% interval, its episodes (n) and, for a
    mixture, each env's headline metric; highest score first (a report without one last). The
    score is the report's headline metric (`_headline_metric`, else the mean reward); a
    mixture's, the unweighted mean of its envs' headline metrics, which has no interval."""
    sections = [report_sections(report, name) for report, name in zip(reports, names, strict=True)]
    envs = list(dict.fromkeys(env for found in sections for env in found))
    metrics = {env: _headline_metric(reports, env) for env in envs}
    rows = []
    for report, name, found in zip(reports, names, sections, strict=True):
        values = [found.get(env, {}).get(metrics[env]) for env in envs]
        score = _score(values)
        episodes = sum(found.get(env, {}).get("episodes", {"mean": 0.0})["mean"] for env in envs)
        rows.append((score, report.get("system"), name, values, episodes))
    # Stable: equal scores keep the order the reports were given in.
    rows.sort(key=lambda row: _sort_key(row[0]))
    mixture = envs != [""]
    score_header = "mean of env headlines" if mixture else f"{metrics['']} [95% CI]"
    env_headers = [f"{env}: {metrics[env]}" for env in envs] if mixture else []
    headers = ["rank", "system", score_header, "n", *env_headers, "report"]
    lines = [_title(reports), ""] + [line for warning in warnings for line in (warning, "")]
    lines += [_legend(coverages), ""]
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for rank, (score, system, name, values, episodes) in enumerate(rows, 1):
        cells = [_cell(value) for value in values] if mixture else []
        system_text = system if isinstance(system, str) and system else "-"
        lines.append(
            f"| {rank} | {system_text} | {_cell(score)} | {episodes:.0f} | "
            + "".join(f"{cell} | " for cell in cells)
            + f"{name} |"
        )
    return "\n".join(lines) + "\n"


def _headline_metric(reports: list[dict], env: str) -> str:
    """The headline metric of `env` ("" the single env of a report) as the first report naming
    one says (`headline_metric`, else that of its degenerate baselines, which a single env's
    report carries where its `headline_metric` is not written), else the mean reward."""
    for report in reports:
        entry = report if env == "" else report.get("envs", {}).get(env)
        if not isinstance(entry, dict):
            continue
        rows = entry.get("degenerate_baselines")
        rows = [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []
        for metric in [entry.get("headline_metric"), *(row.get("headline_metric") for row in rows)]:
            if isinstance(metric, str) and metric:
                return metric
    return "reward"


def _score(values: list[dict[str, float] | None]) -> dict[str, float] | None:
    """One value as it is; several (a mixture's envs) their unweighted mean, without an
    interval (the envs' intervals do not combine into one); None when any is missing."""
    if any(value is None for value in values):
        return None
    if len(values) == 1:
        return values[0]
    mean = sum(value["mean"] for value in values) / len(values)
    return {"mean": mean, "low": mean, "high": mean}


def _sort_key(score: dict[str, float] | None) -> tuple[bool, float]:
    # Missing and nan scores go last; the rest highest first.
    if score is None or math.isnan(score["mean"]):
        return (True, 0.0)
    return (False, -score["mean"])


def _title(reports: list[dict]) -> str:
    env, split = reports[0].get("env_name"), reports[0].get("split")
    where = ", ".join(
        text
        for text in (
            f"env {env}" if isinstance(env, str) and env else "",
            f"{split} split" if isinstance(split, str) and split else "",
        )
        if text
    )
    return f"# Leaderboard of {len(reports)} reports" + (f" ({where})" if where else "")


def _legend(coverages: list[Tasks]) -> str:
    """What the rows share: their tasks and samples per task, as far as the first report says."""
    first = coverages[0]
    text = "Highest score first; n is the number of episodes"
    if first.ids is not None or first.count is not None:
        count = len(first.ids) if first.ids is not None else first.count
        text += f"; the reports cover {count} tasks"
        if first.samples is not None:
            text += f", {first.samples} sample{'' if first.samples == 1 else 's'} per task"
    return text + "."


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
