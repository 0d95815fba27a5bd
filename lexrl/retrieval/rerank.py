"""The light reranker: a cross-encoder scores (query, document) pairs and re-orders the first
stage's top `first_stage_k` (LegalMALR sec. 3.2: dense top-30, reranked to top-10, with
Qwen3-Reranker-4B).

`CrossEncoderReranker` runs a sentence-transformers CrossEncoder locally (the Qwen3-Reranker
checkpoints load as sequence-classification models); `lexrl.retrieval.endpoints.EndpointReranker`
asks a served one. `RerankingRetriever` chains either behind any first stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lexrl.retrieval.base import Hit, Retriever


class Reranker(Protocol):
    name: str

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, higher is more relevant."""
        ...


class CrossEncoderReranker:
    def __init__(
        self,
        model_name_or_path: str,
        batch_size: int = 32,
        max_length: int | None = 512,
        device: str | None = None,
    ):
        from sentence_transformers import CrossEncoder

        self.name = f"cross-encoder:{model_name_or_path}"
        self.model = CrossEncoder(model_name_or_path, max_length=max_length, device=device)
        self.batch_size = batch_size

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        scores = self.model.predict(
            [(query, document) for document in documents],
            batch_size=self.batch_size,
            show_progress_bar=False,
        )
        return [float(s) for s in scores]


class RerankingRetriever:
    """`first_stage` top-`first_stage_k`, re-ordered by `reranker`; hits carry reranker scores."""

    def __init__(
        self,
        first_stage: Retriever,
        reranker: Reranker,
        documents: Sequence[str],
        first_stage_k: int,
    ):
        self.first_stage = first_stage
        self.reranker = reranker
        self.documents = documents
        self.first_stage_k = first_stage_k

    def search(self, query: str, k: int) -> list[Hit]:
        candidates = self.first_stage.search(query, max(k, self.first_stage_k))
        scores = self.reranker.score(query, [self.documents[h.doc_index] for h in candidates])
        order = sorted(range(len(candidates)), key=lambda i: -scores[i])
        return [Hit(candidates[i].doc_index, scores[i]) for i in order[:k]]
