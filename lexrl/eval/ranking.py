"""Ranking metrics with ranx: Recall@K, MRR@K, nDCG@K (binary gains), Hit@K.

A query whose gold set is missed scores 0 in MRR (the standard definition; LegalMALR instead
counts a miss as rank K + 1, papers.md sec. 1). Queries with no retrieved document count as 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from ranx import Qrels, Run, evaluate

METRICS = ("recall", "mrr", "ndcg", "hit_rate")


def ranking_metrics(
    rankings: Mapping[str, Sequence[Hashable]],
    gold: Mapping[str, Sequence[Hashable]],
    ks: Sequence[int] = (10,),
) -> dict[str, float]:
    """Mean metrics over the queries of `gold`.

    rankings: query id -> document ids, best first; gold: query id -> relevant document ids.
    """
    qrels = Qrels({q: {str(d): 1 for d in docs} for q, docs in gold.items() if docs})
    run = Run(
        {
            q: {str(d): float(len(docs) - rank) for rank, d in enumerate(docs)}
            for q, docs in rankings.items()
            if docs
        }
    )
    names = [f"{metric}@{k}" for k in ks for metric in METRICS]
    scores = evaluate(qrels, run, names, make_comparable=True)
    return {name: float(value) for name, value in scores.items()}
