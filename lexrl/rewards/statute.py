"""LegalMALR's trajectory reward (Li et al. 2026, "LegalMALR", arXiv:2601.17692, eq. 1-4), as pure
functions.

R = Recall(pool, G) + alpha * sum_t dCov(t) - 0.05 * T - 5 * [planner exits before any retrieval]

dCov(t) is read as the gold articles newly added to the pool at iteration t divided by |G|
(lexrl's reading of eq. 3; docs/sources.md). T counts planner steps, the final exit (chosen or
forced) included.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence


def recall(retrieved: Iterable[Hashable], gold: Iterable[Hashable]) -> float:
    """|retrieved ∩ gold| / |gold| (0 for an empty gold set)."""
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    return len(set(retrieved) & gold_set) / len(gold_set)


def hit(retrieved: Iterable[Hashable], gold: Iterable[Hashable]) -> float:
    """1 if any gold item was retrieved, else 0."""
    return float(bool(set(retrieved) & set(gold)))


def coverage_gains(
    pool_per_iteration: Sequence[Sequence[Hashable]], gold: Iterable[Hashable]
) -> list[float]:
    """dCov(t) for each iteration, given the pool as it stood after each iteration."""
    gold_set = set(gold)
    gains, seen = [], set()
    for pool in pool_per_iteration:
        now = set(pool) & gold_set
        gains.append(len(now - seen) / len(gold_set) if gold_set else 0.0)
        seen |= now
    return gains


def statute_reward(
    pool: Sequence[Hashable],
    gold: Iterable[Hashable],
    gains: Sequence[float],
    planner_steps: int,
    exited_before_retrieval: bool,
    alpha: float = 0.1,
    step_penalty: float = 0.05,
    early_exit_penalty: float = 5.0,
    recall_k: int | None = None,
) -> dict[str, float]:
    """Named, weighted components of eq. 1-4; their sum is the trajectory reward.

    `recall_k` truncates the (ordered) pool before the recall term; None uses the whole pool as
    eq. 2 does.
    """
    counted = pool if recall_k is None else pool[:recall_k]
    return {
        "recall": recall(counted, gold),
        "coverage_gain": alpha * sum(gains),
        "step_penalty": -step_penalty * planner_steps,
        "early_exit": -early_exit_penalty * float(exited_before_retrieval),
    }
