import math
import random
import subprocess
import sys

import pytest

from lexrl.envs.statute.ranking import per_query_metrics, ranking_metrics


def direct(ranking, gold, k):
    """Textbook definitions: binary gains, log2(rank + 1) discount, a miss scores 0 in MRR."""
    top, gold = ranking[:k], set(gold)
    hits = [i for i, doc in enumerate(top, start=1) if doc in gold]
    dcg = sum(1 / math.log2(i + 1) for i in hits)
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(len(gold), k) + 1))
    return {
        f"recall@{k}": len(hits) / len(gold),
        f"mrr@{k}": 1 / hits[0] if hits else 0.0,
        f"ndcg@{k}": dcg / ideal,
        f"hit_rate@{k}": float(bool(hits)),
    }


def test_trec_eval_agrees_with_direct_formulas_on_fixed_rankings():
    rng = random.Random(7)
    rankings, gold = {}, {}
    for q in range(40):
        gold[f"q{q}"] = rng.sample(range(60), rng.randint(1, 4))
        rankings[f"q{q}"] = rng.sample(range(60), rng.randint(0, 15))
    for k in (1, 5, 10):
        expected = {name: 0.0 for name in direct([], [0], k)}
        for q in gold:
            for name, value in direct(rankings[q], gold[q], k).items():
                expected[name] += value / len(gold)
        measured = ranking_metrics(rankings, gold, ks=[k])
        assert measured == pytest.approx(expected, abs=1e-9)


def test_hand_example():
    metrics = ranking_metrics({"a": [5, 1, 7], "b": [3]}, {"a": [1, 2], "b": [3], "c": [9]}, ks=[2])
    assert metrics["recall@2"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert metrics["mrr@2"] == pytest.approx((0.5 + 1 + 0) / 3)


def test_nothing_retrieved_scores_zero_for_every_query():
    per_query = per_query_metrics({"a": [], "b": []}, {"a": [1], "b": [2, 3]}, ["recall@14"])
    assert per_query == {"recall@14": {"a": 0.0, "b": 0.0}}


def test_a_repeated_id_keeps_its_first_rank():
    per_query = per_query_metrics({"a": [5, 5, 1]}, {"a": [1]}, ["mrr@2", "recall@2"])
    assert per_query == {"mrr@2": {"a": 0.5}, "recall@2": {"a": 1.0}}


def test_several_ks_and_a_query_retrieved_but_without_gold_are_scored_apart():
    per_query = per_query_metrics(
        {"a": [3, 1], "x": [1]}, {"a": [1]}, ["hit_rate@1", "hit_rate@2", "ndcg@2"]
    )
    assert per_query["hit_rate@1"] == {"a": 0.0}
    assert per_query["hit_rate@2"] == {"a": 1.0}
    assert per_query["ndcg@2"]["a"] == pytest.approx(1 / math.log2(3))


def test_an_unknown_metric_is_refused_by_name():
    with pytest.raises(ValueError, match="precision@3"):
        per_query_metrics({"a": [1]}, {"a": [1]}, ["precision@3"])


def test_scoring_imports_no_jit_compiler():
    # The metrics ran on numba (ranx) until it cost every evaluating process 6-28 s.
    script = (
        "import sys\n"
        "from lexrl.envs.statute.ranking import ranking_metrics\n"
        "ranking_metrics({'q': [1, 2]}, {'q': [2]}, ks=[10])\n"
        "print(sorted(m for m in ('numba', 'llvmlite', 'ranx') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"
