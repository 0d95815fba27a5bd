"""LEXam report numbers: MCQ accuracy and open-question judge scores, with percentile-bootstrap
95% intervals over questions (`lexrl.bootstrap.mean_with_ci`); an interval is
`{"mean", "low", "high"}`. `LexamEnv.report` feeds them an evaluation's episodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lexrl.bootstrap import format_interval, mean_with_ci


def _groups(records: Sequence[Mapping], key: str) -> dict:
    groups: dict = {}
    for record in records:
        groups.setdefault(record[key], []).append(record)
    return dict(sorted(groups.items()))


def mcq_metrics(records: Sequence[Mapping], seed: int = 0) -> dict:
    """Accuracy of records `{"gold": int, "predicted": int | None, "language", "n_options"}`
    (predicted None = no parsable answer = wrong).

    Returns `n`, `accuracy` (interval) and `parse_rate` (share with a parsed answer), and the same
    three for each language (`by_language`) and each option count (`by_n_options`, int keys).
    """

    def summary(group: Sequence[Mapping]) -> dict:
        parsed = [r["predicted"] is not None for r in group]
        hits = [float(r["predicted"] is not None and r["predicted"] == r["gold"]) for r in group]
        return {
            "n": len(group),
            "accuracy": mean_with_ci(hits, seed=seed),
            "parse_rate": sum(parsed) / len(group) if group else float("nan"),
        }

    return {
        **summary(records),
        "by_language": {k: summary(g) for k, g in _groups(records, "language").items()},
        "by_n_options": {k: summary(g) for k, g in _groups(records, "n_options").items()},
    }


def open_metrics(records: Sequence[Mapping], seed: int = 0) -> dict:
    """Judge scores of records `{"score": float in [0, 1] | None, "language"}`, reported x100.

    A record with score None is a failed judgement (no parsable score after retries): it counts
    in `n` and `failed` and is left out of the mean, never averaged in as 0. Returns `n`,
    `failed`, `score` (interval of the scored records' mean x100), and the same per language
    (`by_language`).
    """

    def summary(group: Sequence[Mapping]) -> dict:
        scores = [100.0 * r["score"] for r in group if r["score"] is not None]
        return {
            "n": len(group),
            "failed": len(group) - len(scores),
            "score": mean_with_ci(scores, seed=seed),
        }

    return {
        **summary(records),
        "by_language": {k: summary(g) for k, g in _groups(records, "language").items()},
    }


def markdown_breakdown(metrics: Mapping) -> str:
    """`mcq_metrics` or `open_metrics` as one Markdown table: all questions, then each language
    and (MCQ) each option count."""
    rows = [("all", metrics)]
    rows += [(f"language {k}", v) for k, v in metrics["by_language"].items()]
    rows += [(f"{k} options", v) for k, v in metrics.get("by_n_options", {}).items()]
    if "accuracy" in metrics:
        lines = ["| questions | n | accuracy [95% CI] | parse rate |", "|---|---|---|---|"]
        lines += [
            f"| {name} | {m['n']} | {format_interval(m['accuracy'])} | {m['parse_rate']:.4f} |"
            for name, m in rows
        ]
    else:
        lines = ["| questions | n | judge score x100 [95% CI] | failed |", "|---|---|---|---|"]
        lines += [
            f"| {name} | {m['n']} | {format_interval(m['score'])} | {m['failed']} |"
            for name, m in rows
        ]
    return "\n".join(["## LEXam", "", *lines]) + "\n"
