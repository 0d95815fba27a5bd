"""Figures of a run: the training reward by step, and each env's headline metric before and
after training."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lexrl.jsonl import read_appended, step_record

if TYPE_CHECKING:
    from lexrl.envs.base import Env

Interval = dict[str, float]


def plot_before_after(
    path: Path, panels: list[tuple[str, str, Interval | None, Interval | None]]
) -> Path:
    """One panel per env, `(env, metric, before, after)` with each side `{"mean", "low",
    "high"}` or None (not evaluated): two bars with their 95% intervals. Saved as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.4), squeeze=False)
    for axis, (name, metric, before, after) in zip(axes[0], panels, strict=True):
        labels, means, errors = [], [], [[], []]
        for label, value in (("before", before), ("after", after)):
            if value is None:
                continue
            labels.append(label)
            means.append(value["mean"])
            errors[0].append(value["mean"] - value["low"])
            errors[1].append(value["high"] - value["mean"])
        axis.bar(labels, means, yerr=errors, capsize=6, color=["#9aa5b1", "#2b6cb0"][: len(means)])
        axis.set_title(name)
        axis.set_ylabel(metric)
        axis.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def headline_panels(
    env: Env, intervals: dict[str, dict[str, Interval]]
) -> list[tuple[str, str, Interval | None, Interval | None]]:
    """Each env's headline metric (`Env.headline_metric`) before and after, for
    `plot_before_after`: the env itself, or every member of a mixture (`<env>/<metric>`)."""
    members = env.member_envs() or {"": env}
    panels = []
    for name, member in members.items():
        key = f"{name}/{member.headline_metric}" if name else member.headline_metric
        panels.append(
            (
                name or env.name,
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
