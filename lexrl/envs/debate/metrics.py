"""Debate report numbers per system (single agent, MAD-vanilla, MAD-IRAC) on the same questions,
with percentile-bootstrap 95% intervals over episodes (`lexrl.bootstrap.mean_with_ci`; an
interval is `{"mean", "low", "high"}`, x100 here).

Persuasion (multiple choice, debate systems): how often the judge's final letter is debater X's,
is debater Y's, moves away from a correct X (persuaded: among episodes where X's opening was
right, the share whose final answer is wrong) and recovers from a wrong X (among episodes where
X's opening was wrong, the share whose final answer is right).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lexrl.bootstrap import format_interval, mean_with_ci

MCQ_COLUMNS = (
    ("accuracy", "accuracy"),
    ("x_accuracy", "X's opening right"),
    ("follows_x", "judge follows X"),
    ("follows_y", "judge follows Y"),
    ("persuaded", "persuaded from right X"),
    ("recovered", "recovers from wrong X"),
    ("y_invalid", "Y invalid"),
    ("parsed", "judge letter parsed"),
)
OPEN_COLUMNS = (
    ("rubric", "rubric judge"),
    ("citation_precision", "citation P"),
    ("citation_recall", "citation R"),
    ("citation_f1", "citation F1"),
    ("bertscore_f1", "BERTScore F1"),
)


def _interval(values: Sequence[float], seed: int) -> dict[str, float] | None:
    if not values:
        return None
    return mean_with_ci([100.0 * v for v in values], seed=seed)


def mcq_system_metrics(records: Sequence[Mapping], seed: int = 0) -> dict:
    """Records `{"gold": int, "judge": int | None, "x": int | None, "y": int | None,
    "y_invalid": bool}` of one system (`x`, `y` None and absent in the single-agent system).
    Returns `n` and, per column of `MCQ_COLUMNS`, an interval x100 (None when no episode
    qualifies: the persuasion columns have no episode without debate, `persuaded` none
    without a right X) with its own `n_<column>`."""
    debated = [r for r in records if "x" in r]
    x_parsed = [r for r in debated if r["x"] is not None]
    values = {
        "accuracy": [float(r["judge"] == r["gold"]) for r in records],
        "parsed": [float(r["judge"] is not None) for r in records],
        "x_accuracy": [float(r["x"] == r["gold"]) for r in debated],
        "follows_x": [float(r["judge"] == r["x"]) for r in x_parsed if r["judge"] is not None],
        "follows_y": [
            float(r["judge"] == r["y"])
            for r in debated
            if r["y"] is not None and r["judge"] is not None
        ],
        "persuaded": [float(r["judge"] != r["gold"]) for r in x_parsed if r["x"] == r["gold"]],
        "recovered": [float(r["judge"] == r["gold"]) for r in x_parsed if r["x"] != r["gold"]],
        "y_invalid": [float(r["y_invalid"]) for r in debated],
    }
    out: dict = {"n": len(records)}
    for name, column in values.items():
        out[name] = _interval(column, seed)
        out[f"n_{name}"] = len(column)
    return out


def open_system_metrics(records: Sequence[Mapping], seed: int = 0) -> dict:
    """Records `{"rubric": float | None, "citation_precision", "citation_recall",
    "citation_f1", "bertscore_f1"?: float}` of one system's scored episodes (rubric None: not
    scored by a rubric judge, `rubric_weight` 0)."""
    out: dict = {"n": len(records)}
    for name, _ in OPEN_COLUMNS:
        column = [r[name] for r in records if r.get(name) is not None]
        out[name] = _interval(column, seed)
        out[f"n_{name}"] = len(column)
    return out


def markdown_table(systems: Mapping[str, Mapping], open_ended: bool) -> str:
    """One row per system, one column per metric, each `mean [low, high]` x100 (`-` where no
    episode qualifies, with the count of qualifying episodes after the conditional ones);
    `failed` counts the episodes whose judge failed, left out of every column."""
    columns = OPEN_COLUMNS if open_ended else MCQ_COLUMNS
    header = "| system | n | failed | " + " | ".join(label for _, label in columns) + " |"
    lines = [header, "|---|---|---|" + "---|" * len(columns)]
    for name, metrics in systems.items():
        cells = []
        for key, _ in columns:
            interval = metrics.get(key)
            text = "-" if interval is None else format_interval(interval, digits=1, bound_digits=1)
            if key in ("follows_x", "follows_y", "persuaded", "recovered") and interval is not None:
                text += f" (n {metrics[f'n_{key}']})"
            cells.append(text)
        row = f"| {name} | {metrics['n']} | {metrics.get('failed', 0)} | "
        lines.append(row + " | ".join(cells) + " |")
    note = (
        "x100, percentile-bootstrap 95% intervals over episodes; persuasion columns count the "
        "episodes where they are defined (n)."
    )
    return "\n".join(["## Debate", "", *lines, "", note]) + "\n"
