"""Options of the retrievers behind the statute env's queries (`lexrl.retrieval.factory`)."""

from __future__ import annotations

from dataclasses import dataclass

from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, AT_LEAST_1


@dataclass
class RetrievalConfig:
    first_stage: str = "bm25"
    """`bm25` (bm25s; jieba tokens and STARD's stopwords for Chinese) or `dense` (LegalMALR sec.
    4.1 uses Qwen3-Embedding-4B; set `dense_model`)."""
    bm25_variant: str = "lucene"
    """`lucene`: bm25s' Lucene BM25 (k1 1.5, b 0.75, idf never negative). `stard`: the scorer of
    the STARD authors' `src/BM25` code (Robertson idf, k1 1.3, b 0.75, query-term weight with
    k2 1.5), for reproducing the paper's BM25 baselines; docs/benchmarks.md compares the two."""
    dense_model: str = ""
    """sentence-transformers model id or folder (paper: `Qwen/Qwen3-Embedding-4B`), `tiny` for a
    random-weight model built offline (tests, CPU demo), or the model name an endpoint serves."""
    dense_endpoint: str = ""
    """OpenAI-compatible base URL (`http://host:8000/v1`) serving `dense_model` on `/embeddings`;
    empty: run the model in this process. No credentials or query string in it (refused)."""
    dense_query_prompt: str = ""
    """Text put before every query, never before a document (Qwen3-Embedding: `Instruct: Given a
    legal question, retrieve the statute articles that apply\nQuery:`)."""
    reranker_model: str = ""
    """Light reranker over the first stage's top `first_stage_k` (paper: `Qwen/Qwen3-Reranker-4B`,
    as a sentence-transformers CrossEncoder / sequence-classification checkpoint), `tiny`, or the
    model name an endpoint serves; empty: no reranker, the first stage's order is kept."""
    reranker_endpoint: str = ""
    """OpenAI-compatible base URL serving `reranker_model` on `/rerank`; empty: local. No
    credentials or query string in it (refused)."""
    api_key_env: str = "LEXRL_RETRIEVAL_API_KEY"
    """Name of the environment variable holding the endpoints' API key, never the key (refused);
    unset: "EMPTY" is sent, which a server without authentication ignores."""
    device: str = ""
    """Torch device of local dense/reranker models; empty: this process's GPU (`cuda:LOCAL_RANK`)
    when there is one, else the CPU. With 8 training processes and 4B retrieval models, serve
    them once instead (`dense_endpoint`, `reranker_endpoint`)."""
    batch_size: int = 32
    """Encoder / reranker batch size."""
    index_dir: str = ".lexrl_cache/index"
    """Where `lexrl index` caches the corpus embedding matrix (keyed by model and corpus)."""
    cache_size: int = 100_000
    """LRU cache entries of (query, k) -> results; 0 disables it."""

    CHOICES = {"first_stage": ("bm25", "dense"), "bm25_variant": ("lucene", "stard")}
    BOUNDS = {"batch_size": AT_LEAST_1, "cache_size": AT_LEAST_0}

    def check(self, path: str, config: object) -> None:
        if self.first_stage == "dense" and not self.dense_model:
            raise ConfigError(f"`{path}.first_stage` is dense but `dense_model` is empty")
