"""The GDPR report: accuracy per system (configuration x retriever x k, `none`, `live`) with percentile-bootstrap
95% intervals over episodes (`lexrl.bootstrap.mean_with_ci`), x100, beside both baselines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lexrl.bootstrap import format_interval, mean_with_ci


def system_metrics(records: Sequence[Mapping], seed: int = 0, resamples: int = 2000) -> dict:
    """Records `{"correct": 0|1, "parsed": 0|1}` of one system's episodes. `accuracy` counts an
    unparsable reply wrong (papers.md sec. 2); `accuracy_parsed_only` is the official code's
    variant, which drops unparsable replies from the denominator (None when none parsed)."""
    parsed = [r for r in records if r["parsed"]]
    return {
        "n": len(records),
        "accuracy": mean_with_ci(
            [100.0 * r["correct"] for r in records], n_resamples=resamples, seed=seed
        ),
        "accuracy_parsed_only": (
            mean_with_ci([100.0 * r["correct"] for r in parsed], n_resamples=resamples, seed=seed)
            if parsed
            else None
        ),
        "parse_rate": 100.0 * len(parsed) / len(records) if records else float("nan"),
    }


def markdown_table(
    systems: Mapping[str, Mapping], baselines: Mapping[str, float], questions: int, policy: str
) -> str:
    """One row per system, then the baselines on the same questions."""
    lines = [
        "| system | n | accuracy [95% CI] | accuracy, parsed only (official) | parsed |",
        "|---|---|---|---|---|",
    ]
    for name, row in systems.items():
        official = row["accuracy_parsed_only"]
        official_text = "-" if official is None else format_interval(official, 2, 2)
        lines.append(
            f"| {name} ({policy}) | {row['n']} | {format_interval(row['accuracy'], 2, 2)} | "
            f"{official_text} | {row['parse_rate']:.1f} |"
        )
    lines.append(
        f"| uniform random over the options | {questions} | {baselines['random']:.2f} | | |"
    )
    lines.append(f"| always Yes / always B | {questions} | {baselines['prior']:.2f} | | |")
    note = (
        f"{questions} held-out questions; x100, intervals over episodes. A system is "
        "`<agents>/<retriever>/<k>` (chunks of the active agents of the question's own case), "
        "`none` (the question alone) or `live` (the Meta-LLM and its agents, all the policy)."
    )
    return "\n".join(["## GDPR (MASLegalBench)", "", *lines, "", note]) + "\n"
