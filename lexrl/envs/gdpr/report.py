"""The GDPR report: accuracy per system (configuration x retriever x k, `none`, `live`) with percentile-bootstrap
95% intervals over episodes (`lexrl.bootstrap.mean_with_ci`), x100, beside both baselines.

Two parsed-only accuracies stand beside ours (which counts an unparsable reply wrong): the
"lenient" one drops the replies our own parser (`parse_reply`) cannot read, and the "official"
one is the MASLegalBench authors' number, their parser (`parse_official`) and their raw `==`
against the label, dropping what their parser cannot read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lexrl.bootstrap import format_interval, mean_with_ci
from lexrl.envs.gdpr.parsing import parse_official
from lexrl.types import Trajectory


def final_reply(trajectory: Trajectory) -> str | None:
    """The Meta-LLM's answering reply: its last turn (the simulated form has one; the live
    form's last is the integration). None when the episode has no Meta-LLM turn."""
    replies = [turn.text for turn in trajectory.turns if turn.role == "meta"]
    return replies[-1] if replies else None


def episode_record(trajectory: Trajectory, gold: str) -> dict:
    """The record `system_metrics` reads for one episode: ours (`correct`, `parsed`, from the
    trajectory's metrics) and the authors' (`official_parsed`, `official_correct`), read from
    the final reply. `gold` is the task's label; MASLegalBench's `correct_answer` values are
    the bare labels ("Yes", "B"), so comparing with it is comparing with their label."""
    reply = final_reply(trajectory)
    official = parse_official(reply) if reply is not None else None
    parsed = official is not None and official.parsed
    return {
        "correct": trajectory.metrics["accuracy"],
        "parsed": trajectory.metrics["parsed"],
        "official_parsed": float(parsed),
        "official_correct": float(parsed and official.decision == gold),
    }


def _parsed_only(records: Sequence[Mapping], parsed: str, correct: str, seed: int, resamples: int):
    kept = [100.0 * r[correct] for r in records if r[parsed]]
    return mean_with_ci(kept, n_resamples=resamples, seed=seed) if kept else None


def system_metrics(records: Sequence[Mapping], seed: int = 0, resamples: int = 2000) -> dict:
    """Records `{"correct": 0|1, "parsed": 0|1}` of one system's episodes, optionally with
    `official_parsed` and `official_correct` (`episode_record`).

    - `accuracy` counts an unparsable reply wrong (lexrl's rule; docs/sources.md);
    - `accuracy_lenient_parsed_only` drops the replies our parser could not read (None when it
      read none);
    - `accuracy_official` is the authors' number (MASLegalBench `eval.py`): their parser, raw
      `==`, the replies their parser cannot read dropped; None when it read none or when the
      records do not carry the authors' fields;
    - `parse_rate` and `official_parse_rate` are the shares read (the latter None likewise).
    """
    official = bool(records) and all("official_parsed" in r for r in records)
    return {
        "n": len(records),
        "accuracy": mean_with_ci(
            [100.0 * r["correct"] for r in records], n_resamples=resamples, seed=seed
        ),
        "accuracy_lenient_parsed_only": _parsed_only(records, "parsed", "correct", seed, resamples),
        "accuracy_official": (
            _parsed_only(records, "official_parsed", "official_correct", seed, resamples)
            if official
            else None
        ),
        "parse_rate": (
            100.0 * sum(bool(r["parsed"]) for r in records) / len(records)
            if records
            else float("nan")
        ),
        "official_parse_rate": (
            100.0 * sum(bool(r["official_parsed"]) for r in records) / len(records)
            if official
            else None
        ),
    }


def _interval(value: Mapping | None) -> str:
    return "-" if value is None else format_interval(value, 2, 2)


def markdown_table(
    systems: Mapping[str, Mapping], baselines: Mapping[str, float], questions: int, policy: str
) -> str:
    """One row per system, then the baselines on the same questions."""
    lines = [
        "| system | n | accuracy [95% CI] | accuracy, parsed only (lenient parser) "
        "| accuracy, parsed only (official rule) | parsed (lenient / official) |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in systems.items():
        official_rate = row.get("official_parse_rate")
        rates = f"{row['parse_rate']:.1f} / " + (
            "-" if official_rate is None else f"{official_rate:.1f}"
        )
        lines.append(
            f"| {name} ({policy}) | {row['n']} | {format_interval(row['accuracy'], 2, 2)} | "
            f"{_interval(row['accuracy_lenient_parsed_only'])} | "
            f"{_interval(row.get('accuracy_official'))} | {rates} |"
        )
    lines.append(
        f"| uniform random over the options | {questions} | {baselines['random']:.2f} | | | |"
    )
    lines.append(f"| always Yes / always B | {questions} | {baselines['prior']:.2f} | | | |")
    note = (
        f"{questions} held-out questions; x100, intervals over episodes. A system is "
        "`<agents>/<retriever>/<k>` (chunks of the active agents of the question's own case), "
        "`none` (the question alone) or `live` (the Meta-LLM and its agents, all the policy). "
        "Parsed only: the lenient column drops the replies our parser cannot read; the official "
        "column is the MASLegalBench authors' rule (`json.loads`, else the first `{...}`, else "
        "a json fence; the raw `answer` compared with `==` to the label; the replies their "
        "parser cannot read dropped)."
    )
    return "\n".join(["## GDPR (MASLegalBench)", "", *lines, "", note]) + "\n"
