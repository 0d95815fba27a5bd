"""LEXam report numbers: MCQ accuracy and open-question judge scores, with percentile-bootstrap
95% intervals over questions (`lexrl.bootstrap.mean_with_ci`); an interval is
`{"mean", "low", "high"}`. `LexamEnv.report` feeds them an evaluation's episodes.

MCQ accuracy is given twice: by the reward's own parser (`lexrl.envs.mcq.parse_mcq_answer`) and
by the LEXam authors' scorer (`authors_mcq_answer`), the paper's number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache

from lexrl.bootstrap import format_interval, mean_with_ci
from lexrl.envs.mcq import option_label
from lexrl.types import Task, Trajectory


@cache
def _authors_marker(n_options: int) -> re.Pattern[str]:
    labels = sorted((option_label(i, n_options) for i in range(n_options)), key=len, reverse=True)
    return re.compile("###(" + "|".join(map(re.escape, labels)) + ")###")


def authors_mcq_answer(text: str, n_options: int = 4) -> int | None:
    """The LEXam authors' MCQ scorer (their lighteval task, `sample_level_acc`:
    `re.findall(r"###([ABCD])###", response)[-1]`, no match = wrong), generalised from A-D to
    the labels of `n_options` options (`lexrl.envs.mcq.option_label`; with 4 it is their regex
    exactly).

    It reads the raw reply: `findall` takes non-overlapping matches left to right, so in
    `###A###B###` only `###A###` matches and A is the answer (the reward's parser, which finds
    overlapping candidates, answers B); labels are case-sensitive (`###a###` is no answer); and
    thinking is not removed: their scorer is handed the generated text as it is, so a marker
    written before `</think>` answers when the text after it has none (the reward's parser
    reads only what follows the last `</think>`). Returns the 0-based index of the last match,
    or None. Never raises on any string."""
    matches = _authors_marker(n_options).findall(text)
    if not matches:
        return None
    return next(i for i in range(n_options) if option_label(i, n_options) == matches[-1])


def final_answer(trajectory: Trajectory) -> str | None:
    """The examinee's answer as scored: the text of the episode's last examinee or reviewer
    turn (judges' turns are not answers); None when there is none."""
    answers = [turn.text for turn in trajectory.turns if turn.role in ("examinee", "reviewer")]
    return answers[-1] if answers else None


def mcq_record(task: Task, trajectory: Trajectory) -> dict:
    """The record `mcq_metrics` reads for one MCQ episode: the reward parser's `predicted`
    (from the outcome) and the authors' scorer's `authors_predicted` (from the final answer)."""
    answer = final_answer(trajectory)
    n_options = task.meta["n_options"]
    return {
        "gold": task.gold,
        "predicted": trajectory.outcome["predicted"],
        "authors_predicted": None if answer is None else authors_mcq_answer(answer, n_options),
        "language": task.meta["language"],
        "n_options": n_options,
    }


def _groups(records: Sequence[Mapping], key: str) -> dict:
    groups: dict = {}
    for record in records:
        groups.setdefault(record[key], []).append(record)
    return dict(sorted(groups.items()))


def mcq_metrics(records: Sequence[Mapping], seed: int = 0) -> dict:
    """Accuracy of records `{"gold": int, "predicted": int | None, "language", "n_options"}`
    (predicted None = no parsable answer = wrong), optionally with `authors_predicted` (the
    authors' scorer, `mcq_record`).

    Returns `n`, `accuracy` (interval) and `parse_rate` (share with a parsed answer), and, when
    every record carries `authors_predicted`, `accuracy_authors` (interval: the paper's number)
    and `parse_rate_authors`; the same for each language (`by_language`) and each option count
    (`by_n_options`, int keys).
    """
    authors = bool(records) and all("authors_predicted" in r for r in records)

    def rates(group: Sequence[Mapping], key: str) -> tuple[dict, float]:
        hits = [float(r[key] is not None and r[key] == r["gold"]) for r in group]
        parsed = sum(r[key] is not None for r in group)
        return mean_with_ci(hits, seed=seed), parsed / len(group) if group else float("nan")

    def summary(group: Sequence[Mapping]) -> dict:
        accuracy, parse_rate = rates(group, "predicted")
        result = {"n": len(group), "accuracy": accuracy, "parse_rate": parse_rate}
        if authors:
            result["accuracy_authors"], result["parse_rate_authors"] = rates(
                group, "authors_predicted"
            )
        return result

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
    if "accuracy_authors" in metrics:
        lines = [
            "| questions | n | accuracy, authors' scorer (paper) [95% CI] | parse rate "
            "| accuracy, reward's parser [95% CI] | parse rate |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {name} | {m['n']} | {format_interval(m['accuracy_authors'])} | "
            f"{m['parse_rate_authors']:.4f} | {format_interval(m['accuracy'])} | "
            f"{m['parse_rate']:.4f} |"
            for name, m in rows
        ]
    elif "accuracy" in metrics:
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
    if "accuracy_authors" in metrics:
        lines += [
            "",
            "The authors' scorer is the paper's: the last `###X###` of the raw reply, matched "
            "left to right without overlaps, thinking included. The reward's parser reads only "
            "what follows the last `</think>` and lets the marker that ends last win.",
        ]
    return "\n".join(["## LEXam", "", *lines]) + "\n"
