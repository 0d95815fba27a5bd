"""BM25 over a list of documents with bm25s; English by word, Chinese by jieba with stopwords.

Two named scorers (`VARIANTS`): `lucene`, bm25s' defaults, and `stard`, the scorer of the STARD
authors' BM25 baseline (Su et al. 2024, github oneal2000/STARD, `src/BM25`), so that the paper's
BM25 rows can be reproduced; docs/benchmarks.md measures which of their differences matter.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np

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


# STARD's test script drops these besides its stopword file: jieba keeps newlines, spaces and
# full-width brackets as tokens (a backslash and "n" are what it makes of a literal "\\n").
STARD_EXTRA_STOPWORDS = frozenset(["\n", "\\", "n", " ", ".", "（", "）"])


def stard_tokenize(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """jieba's default cut as STARD's baseline uses it: no lower-casing, no stripping, punctuation
    kept unless it is a stopword."""
    import jieba

    return [
        token
        for token in jieba.lcut(text)
        if token not in stopwords and token not in STARD_EXTRA_STOPWORDS
    ]


@dataclass(frozen=True)
class BM25Scoring:
    """One BM25 scorer; the fields are the ways the two `VARIANTS` differ."""

    tokens: str = "lexrl"
    """`lexrl`: `tokenize`; `stard`: `stard_tokenize`."""
    idf: str = "lucene"
    """`lucene`: ln(1 + (N - n + .5) / (n + .5)), always positive; `robertson`:
    ln((N - n + .5) / (n + .5)), negative for a term in more than half the documents, so matching
    it lowers a score (bm25s' own `robertson` floors it at 0)."""
    k1: float = 1.5
    b: float = 0.75
    k2: float | None = None
    """Query-term weighting (Robertson's k3, named k2 in STARD's code): each occurrence of a term that
    appears qf times in the query adds the term's score times qf (k2 + 1) / (qf + k2), so a term
    repeated in the query counts more than linearly. None: each occurrence adds it once (bm25s)."""
    rank_all: bool = False
    """Rank every document, ties in corpus order, those scoring 0 or less included, as STARD's
    loop sorts the whole corpus (a query matching few documents still fills its top k). False:
    only documents with a positive score come back."""


VARIANTS = {
    "lucene": BM25Scoring(),
    "stard": BM25Scoring(tokens="stard", idf="robertson", k1=1.3, k2=1.5, rank_all=True),
}


class BM25Retriever:
    """`search(query, k)` returns the k best documents by BM25, scored as `variant` says (a name
    of `VARIANTS` or a `BM25Scoring`)."""

    def __init__(
        self,
        documents: Sequence[str],
        language: str = "en",
        stopwords: frozenset[str] = frozenset(),
        variant: str | BM25Scoring = "lucene",
    ):
        if isinstance(variant, str) and variant not in VARIANTS:
            raise ValueError(f"BM25 variant {variant!r}: choose from {', '.join(VARIANTS)}")
        self.scoring = VARIANTS[variant] if isinstance(variant, str) else variant
        self.language = language
        self.stopwords = stopwords
        self.num_documents = len(documents)
        scoring = self.scoring
        # bm25s ranks by itself whenever it can express the scorer; otherwise it still builds the
        # document-by-term score matrix and `_scores` weights its columns.
        self._bm25s_ranks = scoring.idf == "lucene" and scoring.k2 is None and not scoring.rank_all
        if self._bm25s_ranks:
            self._index = bm25s.BM25(k1=scoring.k1, b=scoring.b)
        else:
            # atire: the tf part with STARD's (k1 + 1) factor; lucene idf because it is positive
            # for every term, so a column can be rescaled to Robertson's; float64 as STARD's
            # Python floats, so that its exact ties stay ties.
            self._index = bm25s.BM25(
                k1=scoring.k1, b=scoring.b, method="atire", idf_method="lucene", dtype="float64"
            )
        self._index.index([self._tokenize(text) for text in documents], show_progress=False)
        logging.getLogger("bm25s").setLevel(logging.WARNING)

    def _tokenize(self, text: str) -> list[str]:
        if self.scoring.tokens == "stard":
            return stard_tokenize(text, self.stopwords)
        return tokenize(text, self.language, self.stopwords)

    def _scores(self, tokens: list[str]) -> np.ndarray:
        """Every document's score: each distinct query term's column of the bm25s matrix, times
        its query weight and, for Robertson's idf, Robertson's over Lucene's idf of the term."""
        scoring, n = self.scoring, self.num_documents
        scores = np.zeros(n)
        counts = Counter(token for token in tokens if token in self._index.vocab_dict)
        for token, qf in counts.items():
            column = self._index.get_scores([token])
            weight = float(qf)
            if scoring.k2 is not None:
                weight *= qf * (scoring.k2 + 1) / (qf + scoring.k2)
            if scoring.idf == "robertson":
                df = np.count_nonzero(column)
                odds = (n - df + 0.5) / (df + 0.5)
                weight *= math.log(odds) / math.log1p(odds)
            scores += weight * column
        return scores

    def search(self, query: str, k: int) -> list[Hit]:
        tokens = self._tokenize(query)
        k = min(k, self.num_documents)
        if self._bm25s_ranks:
            if not tokens:
                return []
            indices, scores = self._index.retrieve([tokens], k=k, show_progress=False)
            pairs = zip(indices[0], scores[0], strict=True)
            return [Hit(int(i), float(s)) for i, s in pairs if s > 0]
        scores = self._scores(tokens)
        candidates = np.arange(self.num_documents)
        if not self.scoring.rank_all:
            candidates = candidates[scores > 0]
        if len(candidates) > k:
            # everything tied with the k-th score stays, so the stable sort breaks ties by corpus
            # order as a sort of the whole list would
            kth = np.partition(scores[candidates], -k)[-k]
            candidates = candidates[scores[candidates] >= kth]
        best = candidates[np.argsort(-scores[candidates], kind="stable")[:k]]
        return [Hit(int(i), float(scores[i])) for i in best]
