"""Debate report numbers per system (single agent, MAD-vanilla, MAD-IRAC) on the same questions,
with percentile-bootstrap 95% intervals over episodes (`lexrl.bootstrap.mean_with_ci`; an
interval is `{"mean", "low", "high"}`, x100 here).

Persuasion (multiple choice, debate systems): how often the judge's final option is debater X's,
is debater Y's, moves away from a right X (persuaded: among debates whose X opened on the right
option, the share whose final answer is wrong) and recovers from a wrong X (among debates whose
X opened on a wrong option, the share whose final answer is right).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lexrl.bootstrap import format_interval, mean_with_ci
from lexrl.envs.debate.reward import McqOutcome, debate_metrics

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
    "y_invalid": bool}` of one system (`x` and `y` absent in the single-agent system).

    Per episode the numbers are `reward.debate_metrics`' (the same the trainer logs as
    env/<name>): a judge, X or Y that named no option follows nobody and is not right. The
    persuasion columns are conditional: `persuaded` over the debates whose X opened right,
    `recovered` over those whose X opened on a wrong option. Returns `n` and, per column of
    `MCQ_COLUMNS`, an interval x100 (None when no episode qualifies: the debate columns in
    the single-agent system) with its own `n_<column>`."""
    values: dict[str, list[float]] = {name: [] for name, _ in MCQ_COLUMNS}
    for record in records:
        debated = "x" in record
        outcome = McqOutcome(
            record["gold"],
            record["judge"],
            record.get("x"),
            record.get("y"),
            record.get("y_invalid", False),
        )
        metrics = debate_metrics(outcome)
        values["accuracy"].append(metrics["accuracy"])
        values["parsed"].append(metrics["parsed"])
        if not debated:
            continue
        values["x_accuracy"].append(metrics["x_accuracy"])
        values["follows_x"].append(metrics["judge_follows_x"])
        values["follows_y"].append(metrics["judge_follows_y"])
        values["y_invalid"].append(1.0 - metrics["y_valid"])
        if outcome.x == outcome.gold:
            values["persuaded"].append(1.0 - metrics["accuracy"])
        elif outcome.x is not None:
            values["recovered"].append(metrics["accuracy"])
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
            if key in ("persuaded", "recovered") and interval is not None:
                text += f" (n {metrics[f'n_{key}']})"
            cells.append(text)
        row = f"| {name} | {metrics['n']} | {metrics.get('failed', 0)} | "
        lines.append(row + " | ".join(cells) + " |")
    note = (
        "x100, percentile-bootstrap 95% intervals over episodes. 'persuaded' counts the debates "
        "whose X opened on the right option, 'recovers' those whose X opened on a wrong one (n); "
        "a judge that names no option follows nobody and is wrong."
    )
    return "\n".join(["## Debate", "", *lines, "", note]) + "\n"
