"""The argument demo over seeds: before and after, per kind of triple, against each degenerate
policy (docs/benchmarks.md, the argument demo).

    python scripts/demo_table.py configs/argument_cpu.yaml runs/arg_s0 runs/arg_s1 runs/arg_s2

Reads each run's `eval_before.jsonl` (or the one `--before` names) and `eval_after.jsonl` (written
by `lexrl train` with `run.eval_before` and `run.eval_after`), pairs them task by task
(`lexrl.eval.before_after`), and plays the env's degenerate policies on the same held-out tasks
under the config's token cap, as `lexrl audit` does, to pair the trained policy with each of them
(`degenerate_gain.against_each`). Prints Markdown: per seed the reward, `task_score` and
`task_score_with_distinctions` before and after, the right-decision rate per kind and its paired change, the separation `argues_arguable -
argues_non_arguable` with the 95% interval of its change (the two kinds' paired changes resampled
each over its own triples), and how many degenerate policies the trained policy beats with 95%
confidence, paired; then a row per degenerate policy with each run's paired reward difference
against it and the verdict.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.eval.before_after import Change, paired_changes, read_task_means
from lexrl.eval.degenerate_gain import BEATS, against_each
from lexrl.eval.evaluate import degenerate_baselines, eval_tasks
from lexrl.models import config_tokenizer

KINDS = ("arguable", "mismatched", "non_arguable")


def change_text(change: Change | None) -> str:
    """`before -> after (change [95% CI])`; "-" for a metric no triple reports on both sides
    (`task_score_with_distinctions` before a model that never argues)."""
    if change is None:
        return "-"
    d = change.difference
    return (
        f"{change.before:.3f} -> {change.after:.3f} "
        f"({d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}])"
    )


def separation_change(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], seed: int = 0
) -> tuple[float, float, dict[str, float]]:
    """The separation before and after, and the 95% percentile-bootstrap interval of its change
    {mean, low, high}: each kind's per-triple changes resampled over its own triples."""
    changes = {}
    for kind in ("arguable", "non_arguable"):
        key = f"argues_{kind}"
        changes[kind] = np.array(
            [after[t][key] - values[key] for t, values in before.items() if key in values]
        )

    def argue_rate(side: dict[str, dict[str, float]], kind: str) -> float:
        return float(np.mean([v[f"argues_{kind}"] for v in side.values() if f"argues_{kind}" in v]))

    separation_before = argue_rate(before, "arguable") - argue_rate(before, "non_arguable")
    separation_after = argue_rate(after, "arguable") - argue_rate(after, "non_arguable")
    rng = np.random.default_rng(seed)
    draws = [
        rng.choice(changes["arguable"], changes["arguable"].size).mean()
        - rng.choice(changes["non_arguable"], changes["non_arguable"].size).mean()
        for _ in range(2000)
    ]
    low, high = np.percentile(draws, [2.5, 97.5])
    mean = changes["arguable"].mean() - changes["non_arguable"].mean()
    return separation_before, separation_after, {"mean": mean, "low": low, "high": high}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument(
        "--before",
        type=Path,
        help="an evaluation's `eval_<split>.jsonl` to pair every run's `eval_after.jsonl` with, "
        "in place of the run's own `eval_before.jsonl` (which follows the warm-start), e.g. the "
        "untrained model's: `lexrl eval CONFIG --warmstart.enabled false`",
    )
    args = parser.parse_args()
    config = load_config(args.config)
    env = make_env(config.env)
    tokenizer = config_tokenizer(config.model, env.text_corpus())
    tasks = eval_tasks(env, config)
    (audit_rows,) = degenerate_baselines(
        env, tasks, tokenizer, config.eval.seed, config.rollout.max_new_tokens
    ).values()
    keys = ("reward", *env.episode_metrics)
    print(
        "| run | reward | task_score | task_score_with_distinctions | right decisions: arguable "
        "| mismatched | non-arguable | separation | beats each degenerate policy (reward) "
        "| (task_score) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    not_beaten, verdicts = {}, {}
    shared_before = read_task_means(args.before, keys)[""] if args.before else None
    for run in args.runs:
        before = (
            shared_before
            if shared_before is not None
            else read_task_means(run / "eval_before.jsonl", keys)[""]
        )
        after = read_task_means(run / "eval_after.jsonl", keys)[""]
        changes = {c.metric: c for c in paired_changes(before, after, keys)}
        sep_before, sep_after, sep = separation_change(before, after)
        cells = [
            change_text(changes.get(m))
            for m in ("reward", "task_score", "task_score_with_distinctions")
        ]
        cells += [change_text(changes.get(f"right_decision_{kind}")) for kind in KINDS]
        cells.append(
            f"{sep_before:+.3f} -> {sep_after:+.3f} "
            f"({sep['mean']:+.3f} [{sep['low']:+.3f}, {sep['high']:+.3f}])"
        )
        for measure in ("reward", "task_score"):
            each = against_each(after, audit_rows, measure)
            verdicts[run, measure] = each
            missed = [v for v in each if v.verdict != BEATS]
            not_beaten[run, measure] = missed
            cells.append(f"{len(each) - len(missed)} of {len(each)}")
        print(f"| {run.name} | " + " | ".join(cells) + " |")
    print(
        "\nEach cell: before -> after (paired change after - before [95% CI]) over the held-out "
        "triples both evaluations report it on."
    )
    for (run, measure), missed in not_beaten.items():
        for verdict in missed:
            d = verdict.paired
            print(
                f"- {run.name}, {measure}: not above `{verdict.policy}` ({verdict.value:.3f}): "
                f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}], {verdict.verdict}"
            )
    print_each_policy(args.runs, verdicts)


def print_each_policy(runs: list[Path], verdicts: dict) -> None:
    """A row per degenerate policy, best first: its reward on the held-out triples and, per run,
    the trained policy's paired reward difference against it [95% CI] and the verdict."""
    by_policy: dict[str, dict[Path, object]] = {}
    for run in runs:
        for verdict in verdicts[run, "reward"]:
            by_policy.setdefault(verdict.policy, {})[run] = verdict
    print("\n| degenerate policy | its reward | " + " | ".join(run.name for run in runs) + " |")
    print("|---|---:|" + "---|" * len(runs))
    order = sorted(by_policy, key=lambda p: -next(iter(by_policy[p].values())).value)
    for policy in order:
        cells = []
        for run in runs:
            verdict = by_policy[policy].get(run)
            d = verdict.paired if verdict else None
            cells.append(
                f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] {verdict.verdict}"
                if d
                else "-"
            )
        value = next(iter(by_policy[policy].values())).value
        print(f"| `{policy}` | {value:.3f} | " + " | ".join(cells) + " |")
    print("\nEach run's cell: trained policy - degenerate policy, reward, paired over triples.")


if __name__ == "__main__":
    main()
