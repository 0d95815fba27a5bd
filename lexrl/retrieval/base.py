"""One interface for every retriever: `search(query, k) -> list[Hit]`, best first.

BM25, dense, dense + cross-encoder, and their HTTP-served twins all implement it, so the statute
env, the baselines and the benchmarks never care which one runs. `CachedRetriever` puts an LRU
cache of query -> hits in front of any of them: GRPO samples K rewrites of the same question, and
many of them are the same string.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Hit:
    doc_index: int
    """Position of the document in the corpus list the retriever was built on."""
    score: float
    """The retriever's own score (BM25, cosine, reranker logit): comparable within one list."""


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[Hit]:
        """The k best documents for `query`, best first (fewer when fewer match)."""
        ...


class CachedRetriever:
    """An LRU cache of (query, k) -> hits in front of `retriever` (`max_size` entries)."""

    def __init__(self, retriever: Retriever, max_size: int):
        self.retriever = retriever
        self._cached = functools.lru_cache(maxsize=max_size)(self._search)

    def _search(self, query: str, k: int) -> tuple[Hit, ...]:
        return tuple(self.retriever.search(query, k))

    def search(self, query: str, k: int) -> list[Hit]:
        return list(self._cached(query, k))

    def cache_info(self) -> functools._CacheInfo:
        """Hits, misses and size of the cache."""
        return self._cached.cache_info()
