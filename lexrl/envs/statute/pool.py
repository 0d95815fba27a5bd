"""The candidate pool: every emitted query's results merged and de-duplicated.

Order is reciprocal-rank fusion (Cormack et al. 2009, k = 60) over the queries that returned a
document, so the MAS-stage cut-off (pool[:14]) keeps what several rewrites agree on first.
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


class CandidatePool:
    def __init__(self) -> None:
        self._score: dict[int, float] = {}
        self._first_seen: dict[int, int] = {}
        self._best_retrieval_score: dict[int, float] = {}

    def add(self, ranked_doc_ids: Sequence[int], scores: Sequence[float] | None = None) -> None:
        """Merge one query's results; `scores` are the retriever's, kept as each doc's best."""
        for rank, doc_id in enumerate(ranked_doc_ids, start=1):
            self._first_seen.setdefault(doc_id, len(self._first_seen))
            self._score[doc_id] = self._score.get(doc_id, 0.0) + 1.0 / (RRF_K + rank)
        for doc_id, score in zip(
            ranked_doc_ids, scores or [0.0] * len(ranked_doc_ids), strict=True
        ):
            best = self._best_retrieval_score.get(doc_id, float("-inf"))
            self._best_retrieval_score[doc_id] = max(best, float(score))

    def best_score(self, doc_id: int) -> float | None:
        """The best retrieval score `doc_id` got from any query (None when none was given)."""
        return self._best_retrieval_score.get(doc_id)

    def ordered(self) -> list[int]:
        return sorted(self._score, key=lambda d: (-self._score[d], self._first_seen[d]))

    def __len__(self) -> int:
        return len(self._score)
