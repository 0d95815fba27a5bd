"""Ranking metrics with trec_eval (pytrec_eval): Recall@K, MRR@K, nDCG@K (binary gains), Hit@K.

trec_eval's own C code, not a JIT: numba-compiled metrics cost every evaluating process 6 s
(28 s after an install) before its first number. Each K is scored on the rankings cut at K, so
trec_eval's `recip_rank` is MRR@K and its `success` is Hit@K.

A query whose gold set is missed scores 0 in MRR (the standard definition; LegalMALR, Li et al.
2026, arXiv:2601.17692, sec. 4.1, instead counts a miss as rank K + 1). Queries with no retrieved
document count as 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import pytrec_eval

METRICS = ("recall", "mrr", "ndcg", "hit_rate")

# lexrl's name of a metric at K -> trec_eval's measure and the key of its result.
_TREC = {
    "recall": ("recall.{k}", "recall_{k}"),
    "mrr": ("recip_rank", "recip_rank"),
    "ndcg": ("ndcg_cut.{k}", "ndcg_cut_{k}"),
    "hit_rate": ("success.{k}", "success_{k}"),
}


def metric_names(ks: Sequence[int]) -> list[str]:
    return [f"{metric}@{k}" for k in ks for metric in METRICS]


def _parse(name: str) -> tuple[str, int]:
    metric, _, k = name.partition("@")
    if metric not in _TREC or not k.isdigit() or int(k) < 1:
        raise ValueError(f"unknown ranking metric {name!r}: expected one of {metric_names(['K'])}")
    return metric, int(k)


def _scored_top(ranking: Sequence[Hashable], k: int) -> dict[str, float]:
    """The first k distinct ids of `ranking` with falling scores, which give trec_eval their
    order (it sorts by score and breaks ties by id)."""
    top = list(dict.fromkeys(map(str, ranking)))[:k]
    return {doc: float(k - rank) for rank, doc in enumerate(top)}


def per_query_metrics(
    rankings: Mapping[str, Sequence[Hashable]],
    gold: Mapping[str, Sequence[Hashable]],
    names: Sequence[str],
) -> dict[str, dict[str, float]]:
    """metric name -> query id -> value, for every query of `gold` with a non-empty gold set.

    rankings: query id -> document ids, best first (a repeated id counts at its first place);
    gold: query id -> relevant document ids; names: `recall@10`, `hit_rate@14`, ...
    """
    parsed = {name: _parse(name) for name in names}
    queries = [q for q, docs in gold.items() if docs]
    qrels = {q: {str(d): 1 for d in gold[q]} for q in queries}
    scores: dict[str, dict[str, float]] = {name: dict.fromkeys(queries, 0.0) for name in names}
    for k in sorted({k for _, k in parsed.values()}):
        at_k = {name: metric for name, (metric, kk) in parsed.items() if kk == k}
        run = {q: _scored_top(docs, k) for q, docs in rankings.items() if docs and q in qrels}
        if not run:
            continue
        measures = {_TREC[metric][0].format(k=k) for metric in at_k.values()}
        results = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        for name, metric in at_k.items():
            key = _TREC[metric][1].format(k=k)
            for q, values in results.items():
                scores[name][q] = float(values[key])
    return scores


def ranking_metrics(
    rankings: Mapping[str, Sequence[Hashable]],
    gold: Mapping[str, Sequence[Hashable]],
    ks: Sequence[int] = (10,),
) -> dict[str, float]:
    """Mean of each metric at each K over the queries of `gold`."""
    per_query = per_query_metrics(rankings, gold, metric_names(ks))
    return {name: float(np.mean(list(values.values()))) for name, values in per_query.items()}
