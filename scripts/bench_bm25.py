"""BM25 on a 50k-article synthetic Chinese corpus: index build time, and queries/s with and
without the LRU query cache.

    python scripts/bench_bm25.py [--articles 50000] [--distinct 500] [--stream 4000]

The corpus is seeded: articles are sequences of 2-3 character words drawn from a fixed pool of
common characters (no real text is needed to time tokenising and scoring), about 125 characters
long like STARD's gold articles (124 on average). The query stream draws `stream` queries from `distinct` different ones, the way a
GRPO step's K rewrites of one question repeat; "cold" is the uncached retriever on the same
stream, "cached" the same retriever behind `CachedRetriever`, "all hits" a second pass.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time

from lexrl.envs.statute.data import default_stopwords
from lexrl.retrieval.base import CachedRetriever, Retriever
from lexrl.retrieval.bm25 import BM25Retriever

CHARACTERS = (
    "法律条款合同劳动工资赔偿责任当事人权利义务财产婚姻继承租赁房屋土地企业公司股东债务债权"
    "侵权损害刑事民事行政诉讼仲裁调解判决执行申请期限证据程序机关人民法院检察院政府部门规定"
    "应当可以不得依照按照有关处罚罚款拘留许可登记经营管理保护安全生产环境消费者产品质量服务"
    "保险医疗工伤社会养老失业住房公积金税收纳税发票会计审计银行贷款利息担保抵押质押保证违约"
)


def synthetic_corpus(articles: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = list({"".join(rng.sample(CHARACTERS, rng.choice((2, 3)))) for _ in range(6000)})
    corpus = ["".join(rng.choices(words, k=rng.randint(25, 75))) for _ in range(articles)]
    return corpus, words


def time_stream(retriever: Retriever, stream: list[str], k: int) -> float:
    started = time.perf_counter()
    for query in stream:
        retriever.search(query, k)
    return len(stream) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=50_000)
    parser.add_argument("--distinct", type=int, default=500)
    parser.add_argument("--stream", type=int, default=4000)
    parser.add_argument("--k", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    corpus, words = synthetic_corpus(args.articles, args.seed)
    stopwords = default_stopwords()
    started = time.perf_counter()
    retriever = BM25Retriever(corpus, language="zh", stopwords=stopwords)
    build_s = time.perf_counter() - started

    rng = random.Random(args.seed + 1)
    distinct = ["".join(rng.choices(words, k=rng.randint(4, 10))) for _ in range(args.distinct)]
    stream = [rng.choice(distinct) for _ in range(args.stream)]
    cold_qps = time_stream(retriever, stream, args.k)
    cached = CachedRetriever(retriever, max_size=100_000)
    cached_qps = time_stream(cached, stream, args.k)
    info = cached.cache_info()
    all_hits_qps = time_stream(cached, stream, args.k)
    print(
        json.dumps(
            {
                "articles": args.articles,
                "mean_article_chars": round(sum(map(len, corpus)) / len(corpus), 1),
                "index_build_s": round(build_s, 2),
                "stream_queries": args.stream,
                "distinct_queries": len(set(stream)),
                "k": args.k,
                "cold_queries_per_s": round(cold_qps, 1),
                "cached_queries_per_s": round(cached_qps, 1),
                "cache_hit_rate": round(info.hits / (info.hits + info.misses), 3),
                "all_hits_queries_per_s": round(all_hits_qps, 1),
                "machine": f"{platform.machine()}, {platform.python_version()}",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
