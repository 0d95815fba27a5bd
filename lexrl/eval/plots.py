"""Figures of a run: the training reward by step, each env's headline metric before and after
training, and an evaluation's headline metrics beside its teacher's and degenerate policies'."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lexrl.jsonl import read_appended, step_record

if TYPE_CHECKING:
    from lexrl.envs.base import Env

Interval = dict[str, float]
Bar = tuple[str, Interval, str]
"""One bar: its label, `{"mean", "low", "high"}` (low and high may be missing: no error bar)
and its colour."""
Panel = tuple[str, str, list[Bar]]
"""One panel: its title (the env), the y label (the metric) and its bars, left to right."""

BEFORE, AFTER, POLICY, TEACHER, DEGENERATE = "#9aa5b1", "#2b6cb0", "#2b6cb0", "#2f855a", "#c05621"


def plot_bars(
    path: Path,
    panels: list[Panel],
    legend: dict[str, str] | None = None,
    columns: int | None = None,
) -> Path:
    """One panel per env, `columns` a row (None: all side by side), each a bar chart with 95%
    intervals as error bars where a bar has one, and `legend` ({label: colour}) on the first
    panel if given. Saved as a PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    columns = min(columns or len(panels), len(panels))
    rows = -(-len(panels) // columns)
    # A panel widens with its bars, so a dozen degenerate policies' labels stay legible; a
    # column is as wide as its widest panel.
    widths = [max(3.2, 0.5 * len(bars) + 1.6) for _, _, bars in panels]
    column_widths = [max(widths[c::columns]) for c in range(columns)]
    figure, grid = plt.subplots(
        rows,
        columns,
        figsize=(sum(column_widths), 3.4 * rows),
        squeeze=False,
        width_ratios=column_widths,
    )
    axes = [axis for row in grid for axis in row]
    for axis in axes[len(panels) :]:
        axis.set_visible(False)
    for axis, (title, metric, bars) in zip(axes, panels, strict=False):
        labels = [label for label, _, _ in bars]
        axis.bar(
            labels,
            [value["mean"] for _, value, _ in bars],
            color=[colour for _, _, colour in bars],
        )
        # Error bars only where there is an interval: a cap at the mean would read as one.
        ranged = [(label, value) for label, value, _ in bars if "low" in value and "high" in value]
        if ranged:
            axis.errorbar(
                [label for label, _ in ranged],
                [value["mean"] for _, value in ranged],
                yerr=[
                    [value["mean"] - value["low"] for _, value in ranged],
                    [value["high"] - value["mean"] for _, value in ranged],
                ],
                fmt="none",
                ecolor="black",
                capsize=6,
            )
        axis.set_title(title)
        axis.set_ylabel(metric)
        axis.grid(axis="y", alpha=0.3)
        if any(len(label) > 8 for label in labels):
            axis.tick_params(axis="x", labelrotation=45)
            plt.setp(axis.get_xticklabels(), ha="right")
    if legend:
        handles = [Patch(color=colour, label=label) for label, colour in legend.items()]
        axes[0].legend(handles=handles, fontsize="small", loc="best")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def plot_before_after(
    path: Path, panels: list[tuple[str, str, Interval | None, Interval | None]]
) -> Path:
    """One panel per env, `(env, metric, before, after)` with each side `{"mean", "low",
    "high"}` or None (not evaluated): two bars with their 95% intervals. Saved as a PNG."""
    return plot_bars(
        path,
        [
            (
                name,
                metric,
                [
                    (label, value, colour)
                    for label, value, colour in (
                        ("before", before, BEFORE),
                        ("after", after, AFTER),
                    )
                    if value is not None
                ],
            )
            for name, metric, before, after in panels
        ],
    )


def evaluation_panel(
    env: str,
    metric: str,
    policy: str,
    interval: Interval | None,
    baselines: list[tuple[str, float | None]],
) -> Panel:
    """An evaluation's panel of one env: the policy's mean of `metric` with its interval (None:
    not evaluated, or every episode failed), then each baseline's `(name, mean)` that has one
    (the scripted teacher, named `teacher`, and the degenerate policies of `lexrl audit`)."""
    bars: list[Bar] = []
    if interval is not None:
        bars.append((policy, interval, POLICY))
    for name, value in baselines:
        if value is not None:
            bars.append((name, {"mean": value}, TEACHER if name == "teacher" else DEGENERATE))
    return env, metric, bars


EVALUATION_LEGEND = {
    "policy (95% interval)": POLICY,
    "scripted teacher": TEACHER,
    "degenerate policy": DEGENERATE,
}
"""The colours of `evaluation_panel`'s bars."""


def headline_panels(
    env: Env, intervals: dict[str, dict[str, Interval]]
) -> list[tuple[str, str, Interval | None, Interval | None]]:
    """Each env's headline metric (`Env.headline_metric`) before and after, for
    `plot_before_after`: the env itself, or every member of a mixture (`<env>/<metric>`)."""
    from lexrl.envs.composite import composite  # the envs only where a run has one

    view = composite(env)
    panels = []
    for name, member in view.members.items():
        key = view.key(name, member.headline_metric)
        panels.append(
            (
                name,
                member.headline_metric,
                intervals.get("before", {}).get(key),
                intervals.get("after", {}).get(key),
            )
        )
    return panels


def plot_learning_curve(
    output_dir: Path, summaries: dict[str, dict[str, float]], members: list[str] | None = None
) -> Path:
    """The training reward (and, for a mixture, each env's of `members`) by step, with the
    statute env's MAS recall before and after when there is one."""
    members = members or []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = read_appended(output_dir / "metrics.jsonl", step_record)
    records = [record for _, record in metrics]
    steps = [r["step"] for r in records]
    figure, axis = plt.subplots(figsize=(7, 4))
    curves = [("reward/total", "train reward"), ("env/mas_recall", "train MAS recall")]
    curves += [(f"{name}/reward/total", f"train reward, {name}") for name in members]
    for key, label in curves:
        if any(key in r for r in records):
            # A mixture's env is missing from the steps that drew none of its tasks: a gap.
            axis.plot(steps, [r.get(key, float("nan")) for r in records], label=label)
    for name, style in (("before", ":"), ("after", "--")):
        if name in summaries and "mas_recall" in summaries[name]:
            axis.axhline(
                summaries[name]["mas_recall"],
                linestyle=style,
                color="black",
                label=f"eval MAS recall {name}",
            )
    axis.set_xlabel("optimizer step")
    axis.legend()
    axis.grid(alpha=0.3)
    path = output_dir / "learning_curve.png"
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
