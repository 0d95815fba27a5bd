from lexrl.retrieval.bm25 import BM25Retriever, tokenize


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
