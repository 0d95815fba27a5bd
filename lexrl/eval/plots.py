"""Figures of evaluations: each env's headline metric before and after training."""

from __future__ import annotations

from pathlib import Path

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
