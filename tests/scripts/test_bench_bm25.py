"""scripts/bench_bm25.py's synthetic benchmark on a corpus of 300 articles (its STARD ablation
needs the STARD release; tests/envs/test_stard_data.py checks its numbers when it is there)."""

from __future__ import annotations

import json
import math

from tests.scripts import run_script


def test_the_synthetic_benchmark_times_cold_and_cached_queries():
    result = run_script(
        "bench_bm25.py", "--articles", "300", "--distinct", "10", "--stream", "60", "--k", "5"
    )
    report = json.loads(result.stdout)
    assert report["articles"] == 300 and report["variant"] == "lucene"
    assert report["stream_queries"] == 60 and report["distinct_queries"] <= 10
    # 60 queries of at most 10 distinct ones: the cache misses each distinct query once.
    assert report["cache_hit_rate"] == round(1 - report["distinct_queries"] / 60, 3)
    for key in ("index_build_s", "cold_queries_per_s", "cached_queries_per_s"):
        assert math.isfinite(report[key]) and report[key] >= 0
    assert report["all_hits_queries_per_s"] > 0
