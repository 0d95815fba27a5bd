import math
import os
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


def test_ranx_agrees_with_direct_formulas_on_fixed_rankings():
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


def test_ranx_compiling_its_metrics_prints_no_numba_warning(tmp_path):
    # numba warns only while compiling, so compile afresh in an empty cache.
    script = (
        "from lexrl.envs.statute.ranking import ranking_metrics\n"
        "print(ranking_metrics({'q': [1, 2]}, {'q': [2], 'r': [3]}, ks=[10]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "recall@10" in result.stdout
    assert "NumbaTypeSafetyWarning" not in result.stderr
