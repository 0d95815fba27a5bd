"""Positions the update's forwards hold for a rollout's rows, in each layout of the learner.

    python scripts/packed_positions.py ROLLOUTS.jsonl [--micro-batch-size 8]
        [--micro-batch-tokens none,4096]

ROLLOUTS.jsonl is what `lexrl rollout CONFIG --out ROLLOUTS.jsonl` writes. Its trainable turns
become rows, one trajectory after another, and each configuration cuts them into micro-batches as
`Learner.update` does:
- `padded`: `learner.split_micro_batches`, each micro-batch rows x (longest prompt + longest
  completion) (`pack_rows`);
- `shared`: `grpo.shared_prefix`, packs x longest pack (`shared_prefix.packed_size`);
- `padding_free`, `padding_free+shared`: `grpo.padding_free`, the one sequence's tokens
  (`padding_free.flat_size`).
Per layout it prints the positions summed over micro-batches, their ratio to the trained tokens
(prompt + completion of every row) and the number of micro-batches, as a Markdown table. No model
runs: this counts what padding and shared prefixes do to a real rollout's lengths, which the
uniform rows of `scripts/gpu_bench.py` cannot show.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lexrl.errors import PlanError
from lexrl.train.advantages import Row
from lexrl.train.learner import split_micro_batches
from lexrl.train.padding_free import NO_SHARING, flat_size, split_padding_free_micro_batches
from lexrl.train.plan_report import read_trajectories
from lexrl.train.shared_prefix import MIN_SHARED_TOKENS, packed_size, split_shared_micro_batches


def rollout_rows(path: Path) -> list[Row]:
    """The trainable turns of a `lexrl rollout` JSONL as rows (trajectory = its index)."""
    try:
        played = read_trajectories(path)
    except PlanError as error:
        raise SystemExit(str(error)) from None
    rows = [
        Row(list(turn.prompt_ids), list(turn.completion_ids), [0.0] * len(turn.completion_ids),
            1.0, 1.0, index, turn.role)
        for index, trajectory in enumerate(played)
        for turn in trajectory.turns
        if turn.trainable and turn.prompt_ids
    ]  # fmt: skip
    if not rows:
        raise SystemExit(f"{path}: no trainable turns with prompt token ids")
    return rows


def padded_size(chunk: list[Row]) -> int:
    widest_prompt = max(len(r.prompt_ids) for r in chunk)
    return len(chunk) * (widest_prompt + max(len(r.completion_ids) for r in chunk))


def positions(rows: list[Row], size: int, tokens: int | None) -> dict[str, tuple[int, int]]:
    """layout -> (positions over all micro-batches, micro-batches)."""
    cuts = {
        "padded": (split_micro_batches(rows, size, tokens), padded_size),
        "shared": (split_shared_micro_batches(rows, size, tokens), packed_size),
        "padding_free": (
            split_padding_free_micro_batches(rows, size, tokens, shared=False),
            lambda chunk: flat_size(chunk, NO_SHARING),
        ),
        "padding_free+shared": (
            split_padding_free_micro_batches(rows, size, tokens, shared=True),
            lambda chunk: flat_size(chunk, MIN_SHARED_TOKENS),
        ),
    }
    return {name: (sum(map(count, chunks)), len(chunks)) for name, (chunks, count) in cuts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rollouts", type=Path)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    parser.add_argument("--micro-batch-tokens", default="none,4096", help="list; none: rows")
    args = parser.parse_args()
    rows = rollout_rows(args.rollouts)
    trained = sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
    print(f"{len(rows)} rows, {trained:,} trained tokens, from {args.rollouts}")
    print("| micro-batch tokens | layout | positions | / trained tokens | micro-batches |")
    print("|---|---|---:|---:|---:|")
    for budget in args.micro_batch_tokens.split(","):
        tokens = None if budget.strip() == "none" else int(budget)
        for name, (count, chunks) in positions(rows, args.micro_batch_size, tokens).items():
            label = f"{tokens:,}" if tokens else f"- ({args.micro_batch_size} rows)"
            print(f"| {label} | {name} | {count:,} | {count / trained:.2f} | {chunks} |")


if __name__ == "__main__":
    main()
