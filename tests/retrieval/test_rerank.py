import numpy as np

from lexrl.retrieval.base import Hit
from lexrl.retrieval.rerank import CrossEncoderReranker, RerankingRetriever
from lexrl.retrieval.tiny import tiny_retrieval_model

DOCUMENTS = ["alpha beta", "beta gamma", "gamma delta", "delta epsilon", "epsilon zeta"]


class FixedFirstStage:
    def __init__(self):
        self.asked = []

    def search(self, query, k):
        self.asked.append(k)
        return [Hit(i, 1.0 - i / 10) for i in range(min(k, len(DOCUMENTS)))]


class LengthOfOverlap:
    name = "overlap"

    def score(self, query, documents):
        return [float(len(set(query.split()) & set(d.split()))) for d in documents]


def test_reranker_reorders_the_first_stage_top_k_and_cuts():
    first = FixedFirstStage()
    retriever = RerankingRetriever(first, LengthOfOverlap(), DOCUMENTS, first_stage_k=4)
    hits = retriever.search("delta epsilon", 2)
    assert first.asked == [4]
    assert [h.doc_index for h in hits] == [3, 2]
    assert [h.score for h in hits] == [2.0, 1.0]
    # documents outside the first stage's top 4 are never reranked in
    assert 4 not in [h.doc_index for h in retriever.search("epsilon zeta", 4)]


def test_cross_encoder_scores_pairs_with_a_locally_built_model(tmp_path):
    folder = tiny_retrieval_model("reranker", DOCUMENTS, tmp_path)
    reranker = CrossEncoderReranker(str(folder), batch_size=2, device="cpu")
    scores = reranker.score("beta", DOCUMENTS)
    assert len(scores) == 5 and len(set(scores)) > 1
    one_at_a_time = [reranker.score("beta", [d])[0] for d in DOCUMENTS]
    np.testing.assert_allclose(scores, one_at_a_time, rtol=1e-4, atol=1e-5)
    retriever = RerankingRetriever(FixedFirstStage(), reranker, DOCUMENTS, first_stage_k=5)
    assert [h.doc_index for h in retriever.search("beta", 3)] == list(np.argsort(scores)[::-1][:3])
