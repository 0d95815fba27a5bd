"""BM25 over a list of documents with bm25s; English by word, Chinese by jieba with stopwords."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import bm25s

from lexrl.retrieval.base import Hit

_WORD = re.compile(r"\w+", re.UNICODE)

ENGLISH_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    ]
)


def tokenize(text: str, language: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Lower-cased word tokens (`en`) or jieba tokens (`zh`), stopwords and punctuation removed."""
    if language == "zh":
        import jieba

        tokens = [token.strip().lower() for token in jieba.lcut(text)]
        return [
            token for token in tokens if token and _WORD.search(token) and token not in stopwords
        ]
    stop = stopwords or ENGLISH_STOPWORDS
    return [token for token in _WORD.findall(text.lower()) if token not in stop]


class BM25Retriever:
    """`search(query, k)` returns the k best documents by BM25 (Lucene variant, bm25s defaults)."""

    def __init__(
        self,
        documents: Sequence[str],
        language: str = "en",
        stopwords: frozenset[str] = frozenset(),
        variant: str = "lucene",
    ):
        if variant != "lucene":
            raise NotImplementedError(f"BM25 variant {variant!r}")
        self.language = language
        self.stopwords = stopwords
        self.num_documents = len(documents)
        self._index = bm25s.BM25()
        self._index.index(
            [tokenize(text, language, stopwords) for text in documents], show_progress=False
        )
        logging.getLogger("bm25s").setLevel(logging.WARNING)

    def search(self, query: str, k: int) -> list[Hit]:
        tokens = tokenize(query, self.language, self.stopwords)
        if not tokens:
            return []
        k = min(k, self.num_documents)
        indices, scores = self._index.retrieve([tokens], k=k, show_progress=False)
        return [Hit(int(i), float(s)) for i, s in zip(indices[0], scores[0], strict=True) if s > 0]
