"""Build the configured retrievers (`RetrievalConfig`) over a list of document texts. The
endpoint clients (and their `openai` package) are imported only when an endpoint is configured."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lexrl.errors import ConfigError
from lexrl.hub import loading
from lexrl.retrieval.base import CachedRetriever, Retriever
from lexrl.retrieval.bm25 import BM25Retriever
from lexrl.retrieval.dense import DenseRetriever, Encoder, SentenceTransformerEncoder
from lexrl.retrieval.options import RetrievalConfig
from lexrl.retrieval.rerank import CrossEncoderReranker, Reranker, RerankingRetriever


def _local_model(name: str, kind: str, documents: Sequence[str], config: RetrievalConfig) -> str:
    if name != "tiny":
        return name
    from lexrl.retrieval.tiny import tiny_retrieval_model

    cache = Path(config.index_dir).parent
    return str(tiny_retrieval_model(kind, list(documents), cache))  # type: ignore[arg-type]


def _device(config: RetrievalConfig) -> str | None:
    """The configured device, else this process's GPU under `accelerate launch` (LOCAL_RANK),
    so 8 processes do not all load the retrieval models onto GPU 0."""
    if config.device:
        return config.device
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return None


def build_encoder(config: RetrievalConfig, documents: Sequence[str]) -> Encoder:
    if not config.dense_model:
        raise ConfigError("no dense model: set `env.retrieval.dense_model`")
    if config.dense_endpoint:
        from lexrl.retrieval.endpoints import EndpointEncoder

        return EndpointEncoder(
            config.dense_endpoint,
            config.dense_model,
            config.dense_query_prompt,
            api_key_env=config.api_key_env,
        )
    with loading("env.retrieval.dense_model", config.dense_model):
        return SentenceTransformerEncoder(
            _local_model(config.dense_model, "embedder", documents, config),
            config.dense_query_prompt,
            config.batch_size,
            _device(config),
        )


def build_reranker(config: RetrievalConfig, documents: Sequence[str]) -> Reranker:
    if not config.reranker_model:
        raise ConfigError("no reranker: set `env.retrieval.reranker_model`")
    if config.reranker_endpoint:
        from lexrl.retrieval.endpoints import EndpointReranker

        return EndpointReranker(
            config.reranker_endpoint, config.reranker_model, api_key_env=config.api_key_env
        )
    with loading("env.retrieval.reranker_model", config.reranker_model):
        return CrossEncoderReranker(
            _local_model(config.reranker_model, "reranker", documents, config),
            config.batch_size,
            device=_device(config),
        )


def build_dense(
    config: RetrievalConfig, documents: Sequence[str], show_progress: bool = True
) -> DenseRetriever:
    """The dense retriever, encoding the corpus on first use (`lexrl index` does it ahead)."""
    return DenseRetriever.from_documents(
        build_encoder(config, documents), documents, config.index_dir, show_progress
    )


def build_retriever(
    config: RetrievalConfig,
    documents: Sequence[str],
    first_stage_k: int,
    language: str = "en",
    stopwords: frozenset[str] = frozenset(),
    first_stage: str | None = None,
    rerank: bool | None = None,
    bm25_variant: str | None = None,
) -> Retriever:
    """`first_stage` and `bm25_variant` (default: the config's), then the light reranker when
    one is configured (`rerank` forces it on or off), behind the LRU cache."""
    first_stage = first_stage or config.first_stage
    retriever: Retriever
    if first_stage == "dense":
        retriever = build_dense(config, documents)
    else:
        retriever = BM25Retriever(
            documents, language, stopwords, variant=bm25_variant or config.bm25_variant
        )
    if config.reranker_model if rerank is None else rerank:
        retriever = RerankingRetriever(
            retriever, build_reranker(config, documents), documents, first_stage_k
        )
    if config.cache_size > 0:
        retriever = CachedRetriever(retriever, config.cache_size)
    return retriever
