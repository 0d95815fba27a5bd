"""Did training move the reward by more than the seeds disagree? Compares the before/after
evaluations of runs that differ only in `run.seed` (docs/benchmarks.md, the CPU mixture demo).

    python scripts/seed_spread.py runs/legal_mix_cpu_s0 runs/legal_mix_cpu_s1 runs/legal_mix_cpu_s2

Reads each run's `eval_summary.json` (written by `lexrl train` with `run.eval_before` and
`run.eval_after`). For a mixture, the mixture's mean reward is the unweighted mean of its envs'
held-out `<env>/reward` (the demo weighs its envs equally); each env's own numbers follow. Prints
per seed the value before and after and the rise, then the mean rise against the spread of the
rises over the seeds (max - min), as a Markdown table; then, where the runs wrote
`eval_vs_degenerate.json`, each seed's value after training against the best degenerate policy.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def env_names(summary: dict[str, float]) -> list[str]:
    """The member envs of a mixture's summary (`<env>/<metric>` keys); [""] for a single env."""
    names = [key.split("/", 1)[0] for key in summary if key.endswith("/reward")]
    return list(dict.fromkeys(names)) or [""]


def value(summary: dict[str, float], env: str, metric: str) -> float:
    return summary[f"{env}/{metric}" if env else metric]


def mixture_reward(summary: dict[str, float]) -> float:
    return statistics.fmean(value(summary, env, "reward") for env in env_names(summary))


def load(run: Path) -> dict[str, dict[str, float]]:
    path = run / "eval_summary.json"
    if not path.is_file():
        raise SystemExit(f"{path}: missing (was the run trained with eval_before and eval_after?)")
    summaries = json.loads(path.read_text())
    for name in ("before", "after"):
        if name not in summaries:
            raise SystemExit(f"{path}: no {name!r} evaluation")
    return summaries


def row(label: str, befores: list[float], afters: list[float]) -> str:
    rises = [a - b for b, a in zip(befores, afters, strict=True)]
    cells = [
        f"{b:.3f} -> {a:.3f} ({r:+.3f})" for b, a, r in zip(befores, afters, rises, strict=True)
    ]
    spread = max(rises) - min(rises)
    verdict = "yes" if statistics.fmean(rises) > spread else "no"
    return (
        f"| {label} | "
        + " | ".join(cells)
        + (f" | {statistics.fmean(rises):+.3f} | {spread:.3f} | {verdict} |")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="output folders of the seeded runs")
    parser.add_argument(
        "--metrics",
        nargs="*",
        default=["reward"],
        help="per-env metrics to tabulate besides the mixture's mean reward (an env without "
        "one is skipped)",
    )
    args = parser.parse_args()
    if len(args.runs) < 2:
        raise SystemExit("give at least two runs: a spread needs seeds to compare")
    runs = [load(run) for run in args.runs]
    header = " | ".join(run.name for run in args.runs)
    print(f"| value | {header} | mean rise | spread of rises | rise > spread |")
    print("|---" * (len(runs) + 4) + "|")
    befores = [run["before"] for run in runs]
    afters = [run["after"] for run in runs]
    envs = env_names(befores[0])
    if envs != [""]:
        print(row("mixture mean reward", [mixture_reward(s) for s in befores],
                  [mixture_reward(s) for s in afters]))  # fmt: skip
    for env in envs:
        for metric in args.metrics:
            label = f"{env}/{metric}" if env else metric
            if label not in befores[0]:
                continue
            print(row(label, [value(s, env, metric) for s in befores],
                      [value(s, env, metric) for s in afters]))  # fmt: skip
    gains = [run / "eval_vs_degenerate.json" for run in args.runs]
    if all(path.is_file() for path in gains):
        print()
        print(degenerate_table(args.runs, [json.loads(path.read_text()) for path in gains]))


def degenerate_table(runs: list[Path], gains: list[list[dict]]) -> str:
    """Per env and measure, each seed's held-out value after training against the best
    degenerate policy on the same tasks (`eval_vs_degenerate.json`, written by `lexrl train`),
    with the verdict: does the after value's 95% interval lie above it?"""
    lines = [
        "| env | measure | best degenerate policy | its value | "
        + " | ".join(f"{run.name}: after (beats it?)" for run in runs)
        + " |",
        "|---" * (4 + len(runs)) + "|",
    ]
    for first, *others in zip(*gains, strict=True):
        cells = [f"{g['after']:.3f} ({g['verdict']})" for g in (first, *others)]
        best = "n/a" if first["best_value"] is None else f"{first['best_value']:.3f}"
        lines.append(
            f"| {first['env']} | {first['measure']} | {first['best_policy']} | {best} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
