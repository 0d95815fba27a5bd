import math

import pytest

from lexrl.retrieval.bm25 import BM25Retriever, BM25Scoring, stard_tokenize, tokenize


def test_english_search_ranks_the_matching_document_first():
    retriever = BM25Retriever(
        [
            "the lessor shall refund the security deposit",
            "overtime compensation for working hours",
            "rent increase notice",
        ]
    )
    assert [hit.doc_index for hit in retriever.search("security deposit refund", 2)][0] == 0
    assert retriever.search("the and of", 3) == []
    assert retriever.search("zebra", 3) == []


def test_chinese_is_tokenised_with_jieba_and_stopwords():
    stopwords = frozenset({"的", "了"})
    tokens = tokenize("个体工商户的债务由谁承担", "zh", stopwords)
    assert "的" not in tokens and "债务" in tokens
    retriever = BM25Retriever(
        ["个体工商户的债务，以个人财产承担", "夫妻共同财产的分割"],
        language="zh",
        stopwords=stopwords,
    )
    assert retriever.search("个体工商户欠的债务", 1)[0].doc_index == 0


def test_stard_tokens_keep_case_and_punctuation_but_drop_its_extra_stopwords():
    tokens = stard_tokenize("Rent，押金（定金）\n deposit", frozenset({"，"}))
    assert tokens == ["Rent", "押金", "定金", "deposit"]


# Three documents: "rent" and "tax" are each in 2 of them, so their Robertson idf is negative.
STARD_CORPUS = ["rent rent deposit", "rent tax", "tax fee"]


def stard_term(idf_n: int, tf: int, dl: int, qf: int) -> float:
    """One query token's share of a STARD BM25 score, written out: N = 3 documents, avgdl = 7/3,
    k1 = 1.3, b = 0.75, k2 = 1.5."""
    idf = math.log((3 - idf_n + 0.5) / (idf_n + 0.5))
    tf_part = tf * 2.3 / (tf + 1.3 * (0.25 + 0.75 * dl / (7 / 3)))
    return idf * tf_part * qf * 2.5 / (qf + 1.5)


def test_stard_score_is_the_formula_with_negative_idf():
    retriever = BM25Retriever(STARD_CORPUS, "zh", variant="stard")
    hits = retriever.search("deposit rent rent", 3)
    # each of the two "rent" adds its share, weighted by its query count 2
    expected = stard_term(1, tf=1, dl=3, qf=1) + 2 * stard_term(2, tf=2, dl=3, qf=2)
    assert expected < 0
    # a document matching nothing (score 0) ranks above those matching only common terms
    assert [hit.doc_index for hit in hits] == [2, 0, 1]
    assert hits[0].score == 0
    assert hits[1].score == pytest.approx(expected, rel=1e-12)
    assert hits[2].score == pytest.approx(2 * stard_term(2, tf=1, dl=2, qf=2), rel=1e-12)


def test_stard_repeated_query_token_weighs_more_than_linearly():
    retriever = BM25Retriever(STARD_CORPUS, "zh", variant="stard")
    once = {hit.doc_index: hit.score for hit in retriever.search("tax", 3)}
    twice = {hit.doc_index: hit.score for hit in retriever.search("tax tax", 3)}
    assert once[2] == pytest.approx(stard_term(2, tf=1, dl=2, qf=1), rel=1e-12)
    assert twice[2] == pytest.approx(once[2] * 2 * (2 * 2.5 / 3.5), rel=1e-12)


def test_stard_ties_keep_corpus_order():
    retriever = BM25Retriever(
        ["fee tax", "rent", "tax fee", "deposit", "rent"], "zh", variant="stard"
    )
    assert [hit.doc_index for hit in retriever.search("fee", 5)] == [0, 2, 1, 3, 4]
    # the cut at k falls inside a tie: the earlier documents of the tie come back
    assert [hit.doc_index for hit in retriever.search("fee", 3)] == [0, 2, 1]
    # no query token: every document ties at 0, as in STARD's loop
    assert [hit.doc_index for hit in retriever.search("的", 2)] == [0, 1]


def test_weighted_columns_score_as_bm25s_itself():
    documents = ["rent rent deposit", "rent tax", "tax fee", "deposit fee fee"]
    bm25s_ranked = BM25Retriever(documents, "zh")
    # k2 weighs a term the query holds once by exactly 1; atire's tf part is lucene's times k1 + 1
    weighted = BM25Retriever(documents, "zh", variant=BM25Scoring(k2=1.5))
    for query in ("deposit rent", "fee tax deposit", "tax"):
        expected = {h.doc_index: h.score * 2.5 for h in bm25s_ranked.search(query, 4)}
        got = {h.doc_index: h.score for h in weighted.search(query, 4)}
        assert got == pytest.approx(expected, rel=1e-6)


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="choose from lucene, stard"):
        BM25Retriever(["a"], variant="okapi")
