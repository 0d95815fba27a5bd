"""Ranking metrics with ranx: Recall@K, MRR@K, nDCG@K (binary gains), Hit@K.

A query whose gold set is missed scores 0 in MRR (the standard definition; LegalMALR, Li et al.
2026, arXiv:2601.17692, sec. 4.1, instead counts a miss as rank K + 1). Queries with no retrieved
document count as 0.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from numba.core.errors import NumbaTypeSafetyWarning
from ranx import Qrels, Run, evaluate

METRICS = ("recall", "mrr", "ndcg", "hit_rate")


def metric_names(ks: Sequence[int]) -> list[str]:
    return [f"{metric}@{k}" for k in ks for metric in METRICS]


def per_query_metrics(
    rankings: Mapping[str, Sequence[Hashable]],
    gold: Mapping[str, Sequence[Hashable]],
    names: Sequence[str],
) -> dict[str, dict[str, float]]:
    """metric name -> query id -> value, for every query of `gold` with a non-empty gold set.

    rankings: query id -> document ids, best first; gold: query id -> relevant document ids;
    names: ranx metric names (`recall@10`, `hit_rate@14`, ...).
    """
    queries = [q for q, docs in gold.items() if docs]
    retrieved = {
        q: {str(d): float(len(docs) - rank) for rank, d in enumerate(docs)}
        for q, docs in rankings.items()
        if docs and q in gold
    }
    if not retrieved:  # ranx cannot build an empty Run; nothing retrieved scores 0 everywhere
        return {name: dict.fromkeys(queries, 0.0) for name in names}
    qrels = Qrels({q: {str(d): 1 for d in gold[q]} for q in queries})
    run = Run(retrieved)
    with warnings.catch_warnings():
        # ranx's metrics index with a uint64 loop counter and numba warns about the cast while
        # compiling them (the first evaluation after an install): harmless, and console noise.
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        evaluate(qrels, run, list(names), make_comparable=True)
    return {name: {q: float(run.scores[name].get(q, 0.0)) for q in queries} for name in names}


def ranking_metrics(
    rankings: Mapping[str, Sequence[Hashable]],
    gold: Mapping[str, Sequence[Hashable]],
    ks: Sequence[int] = (10,),
) -> dict[str, float]:
    """Mean of each metric at each K over the queries of `gold`."""
    per_query = per_query_metrics(rankings, gold, metric_names(ks))
    return {name: float(np.mean(list(values.values()))) for name, values in per_query.items()}
