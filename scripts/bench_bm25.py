"""BM25 on a 50k-article synthetic Chinese corpus: index build time, and queries/s with and
without the LRU query cache; or, with `--stard-ablation`, lexrl's BM25 against the STARD authors'.

    python scripts/bench_bm25.py [--variant lucene] [--articles 50000] [--distinct 500] [--stream 4000]
    python scripts/bench_bm25.py --stard-ablation ../shared/data/stard

The corpus is seeded: articles are sequences of 2-3 character words drawn from a fixed pool of
common characters (no real text is needed to time tokenising and scoring), about 125 characters
long like STARD's gold articles (124 on average). The query stream draws `stream` queries from `distinct` different ones, the way a
GRPO step's K rewrites of one question repeat; "cold" is the uncached retriever on the same
stream, "cached" the same retriever behind `CachedRetriever`, "all hits" a second pass.

The ablation scores the 309 test queries of the STARD directory's split with Hit / Recall / MRR
@10, starting from lexrl's `bm25` baseline as `lexrl eval` runs it and switching on one of the
STARD baseline's differences at a time, then all of them but one (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import time
from pathlib import Path

import numpy as np

from lexrl.envs.statute.data import default_stopwords, load_stard
from lexrl.envs.statute.ranking import per_query_metrics
from lexrl.retrieval.base import CachedRetriever, Retriever
from lexrl.retrieval.bm25 import VARIANTS, BM25Retriever

CHARACTERS = (
    "法律条款合同劳动工资赔偿责任当事人权利义务财产婚姻继承租赁房屋土地企业公司股东债务债权"
    "侵权损害刑事民事行政诉讼仲裁调解判决执行申请期限证据程序机关人民法院检察院政府部门规定"
    "应当可以不得依照按照有关处罚罚款拘留许可登记经营管理保护安全生产环境消费者产品质量服务"
    "保险医疗工伤社会养老失业住房公积金税收纳税发票会计审计银行贷款利息担保抵押质押保证违约"
)


def synthetic_corpus(articles: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    words = sorted({"".join(rng.sample(CHARACTERS, rng.choice((2, 3)))) for _ in range(6000)})
    corpus = ["".join(rng.choices(words, k=rng.randint(25, 75))) for _ in range(articles)]
    return corpus, words


def time_stream(retriever: Retriever, stream: list[str], k: int) -> float:
    started = time.perf_counter()
    for query in stream:
        retriever.search(query, k)
    return len(stream) / (time.perf_counter() - started)


@dataclasses.dataclass(frozen=True)
class Setup:
    """Corpus, keys and scorer of one ablation row; the defaults are lexrl's `bm25` baseline as it
    was before the loader fix."""

    by_position: bool = True
    """Articles and gold keyed by `match_id` paired with `match_name` by position, as lexrl's
    loader did before it keyed the gold-article union by name: the release lists `match_id` in
    ascending order and `match_name` not, so the pairs are crossed in multi-article queries and
    some articles' texts sit under another article's id (1,445 ids, 1,332 distinct texts).
    False: the loader as it is, keyed by article name as STARD's script keys its corpus dict and
    scores hits."""
    content_only: bool = False
    """Index an article's content alone, as STARD does; False: `name content`, as the env does."""
    scoring: dict[str, object] = dataclasses.field(default_factory=dict)
    """`BM25Scoring` fields changed from the lucene variant."""


DIFFERENCES = {
    "articles and gold keyed by name": Setup(by_position=False),
    "content only, no name in the indexed text": Setup(content_only=True),
    "STARD tokens (jieba raw cut, its extra stopwords)": Setup(scoring={"tokens": "stard"}),
    "Robertson idf, negative": Setup(scoring={"idf": "robertson"}),
    "k1 = 1.3": Setup(scoring={"k1": 1.3}),
    "query-term weighting, k2 = 1.5": Setup(scoring={"k2": 1.5}),
    "every article ranked, ties in corpus order": Setup(scoring={"rank_all": True}),
}
STARD = Setup(False, True, dataclasses.asdict(VARIANTS["stard"]))


def without(difference: str) -> Setup:
    """The STARD setup with one of `DIFFERENCES` switched back to lexrl's."""
    switch = DIFFERENCES[difference]
    lucene = dataclasses.asdict(VARIANTS["lucene"])
    return Setup(
        by_position=STARD.by_position or not switch.by_position,
        content_only=STARD.content_only and not switch.content_only,
        scoring={**STARD.scoring, **{field: lucene[field] for field in switch.scoring}},
    )


def stard_metrics(directory: Path, setup: Setup, k: int = 10) -> dict[str, float]:
    """Mean Hit / Recall / MRR @k over the split's test queries under `setup`."""
    data = load_stard(directory / "queries.json", directory / "split.json")
    tasks = data.splits["test"]
    if setup.by_position:
        records = {
            str(r["query_id"]): r for r in json.loads((directory / "queries.json").read_text())
        }
        articles: dict[int, dict] = {}
        for record in records.values():
            for article_id, name in zip(record["match_id"], record["match_name"], strict=True):
                articles[article_id] = {
                    "id": article_id,
                    "name": name,
                    "content": record["相关法规"][name].strip(),
                }
        corpus = [articles[i] for i in sorted(articles)]
        gold = {task.id: records[task.id]["match_id"] for task in tasks}
    else:
        corpus = data.corpus
        gold = {task.id: task.gold for task in tasks}
    documents = [
        a["content"] if setup.content_only else f"{a['name']} {a['content']}" for a in corpus
    ]
    scoring = dataclasses.replace(VARIANTS["lucene"], **setup.scoring)
    retriever = BM25Retriever(documents, "zh", default_stopwords(), variant=scoring)
    rankings = {
        task.id: [corpus[hit.doc_index]["id"] for hit in retriever.search(task.inputs["query"], k)]
        for task in tasks
    }
    names = [f"hit_rate@{k}", f"recall@{k}", f"mrr@{k}"]
    per_query = per_query_metrics(rankings, gold, names)
    return {name: round(float(np.mean(list(per_query[name].values()))), 4) for name in names}


def stard_ablation(directory: Path) -> None:
    rows = {"lexrl `bm25` (lucene), ids paired with names by position": Setup()}
    rows.update({f"+ {name}": setup for name, setup in DIFFERENCES.items()})
    rows["all of them: `stard` variant, keyed by name"] = STARD
    rows.update({f"all but: {name}": without(name) for name in DIFFERENCES})
    rows["`stard` variant, the loader's corpus (keyed by name), name and content indexed"] = (
        dataclasses.replace(STARD, content_only=False)
    )
    rows["`bm25` (lucene), the loader's corpus, name and content indexed"] = Setup(
        by_position=False
    )
    print("| setting | Hit@10 | Recall@10 | MRR@10 |\n|---|---|---|---|")
    for name, setup in rows.items():
        metrics = stard_metrics(directory, setup)
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in metrics.values()) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="lucene", choices=sorted(VARIANTS))
    parser.add_argument("--articles", type=int, default=50_000)
    parser.add_argument("--distinct", type=int, default=500)
    parser.add_argument("--stream", type=int, default=4000)
    parser.add_argument("--k", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stard-ablation", type=Path, metavar="STARD_DIR")
    args = parser.parse_args()
    if args.stard_ablation:
        stard_ablation(args.stard_ablation)
        return

    corpus, words = synthetic_corpus(args.articles, args.seed)
    stopwords = default_stopwords()
    started = time.perf_counter()
    retriever = BM25Retriever(corpus, language="zh", stopwords=stopwords, variant=args.variant)
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
                "variant": args.variant,
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
