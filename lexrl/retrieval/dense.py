"""Dense retrieval: an embedding matrix of the corpus, built once, cached on disk, searched by dot
product of L2-normalised vectors (cosine).

The paper's first stage is Qwen3-Embedding-4B (LegalMALR sec. 4.1); any sentence-transformers model
or an OpenAI-compatible `/v1/embeddings` endpoint (`lexrl.retrieval.endpoints`) can stand in.
Building the matrix for STARD's 55,348 articles with a 4B model takes a while, so `lexrl index`
writes it in shards of `shard_size` documents and a crashed build resumes at the first missing one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from tqdm.auto import tqdm

from lexrl.retrieval.base import Hit

TextKind = Literal["query", "document"]


class Encoder(Protocol):
    name: str
    """Identifies the model (and anything that changes document vectors) in the index cache key."""

    def encode(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        """(len(texts), dim) float32 rows of unit length."""
        ...


class SentenceTransformerEncoder:
    """A sentence-transformers model, local folder or hub id; `query_prompt` prefixes queries only
    (Qwen3-Embedding expects `Instruct: <task>\\nQuery:` before a query, nothing before a document).
    """

    def __init__(
        self,
        model_name_or_path: str,
        query_prompt: str = "",
        batch_size: int = 32,
        device: str | None = None,
    ):
        from sentence_transformers import SentenceTransformer

        self.name = f"st:{model_name_or_path}"
        self.model = SentenceTransformer(model_name_or_path, device=device)
        self.query_prompt = query_prompt
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        vectors = self.model.encode(
            list(texts),
            prompt=self.query_prompt if kind == "query" and self.query_prompt else None,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def index_key(encoder_name: str, documents: Sequence[str]) -> str:
    """Hash of the encoder name and every document: a changed corpus or model is a new index."""
    digest = hashlib.sha256(encoder_name.encode())
    for text in documents:
        digest.update(b"\0")
        digest.update(text.encode())
    return digest.hexdigest()[:16]


def build_index(
    encoder: Encoder,
    documents: Sequence[str],
    index_dir: str | Path,
    shard_size: int = 4096,
    show_progress: bool = True,
) -> Path:
    """Encode `documents` into `<index_dir>/<key>.npy` (n_docs, dim), or return the existing file.

    Shards land in `<key>.partial/` first; a rerun after a crash keeps the finished shards.
    """
    index_dir = Path(index_dir)
    key = index_key(encoder.name, documents)
    final = index_dir / f"{key}.npy"
    if final.is_file():
        return final
    partial = index_dir / f"{key}.partial"
    partial.mkdir(parents=True, exist_ok=True)
    starts = range(0, len(documents), shard_size)
    bar = tqdm(total=len(documents), desc="encoding corpus", unit="doc", disable=not show_progress)
    for number, start in enumerate(starts):
        shard = partial / f"{number:05d}.npy"
        batch = documents[start : start + shard_size]
        if not shard.is_file():
            vectors = encoder.encode(batch, "document")
            np.save(partial / f"{number:05d}.tmp.npy", vectors)
            (partial / f"{number:05d}.tmp.npy").replace(shard)
        bar.update(len(batch))
    bar.close()
    matrix = np.concatenate([np.load(partial / f"{n:05d}.npy") for n in range(len(starts))])
    np.save(index_dir / f"{key}.tmp.npy", matrix)
    (index_dir / f"{key}.tmp.npy").replace(final)
    meta = {"encoder": encoder.name, "documents": len(documents), "dim": int(matrix.shape[1])}
    (index_dir / f"{key}.json").write_text(json.dumps(meta, indent=2))
    shutil.rmtree(partial)
    return final


class DenseRetriever:
    """Cosine top-k over the corpus matrix built by `build_index`."""

    def __init__(self, encoder: Encoder, matrix: np.ndarray, index_path: Path | None = None):
        if matrix.ndim != 2:
            raise ValueError(f"expected a (documents, dim) matrix, got shape {matrix.shape}")
        self.encoder = encoder
        self.matrix = matrix
        self.index_path = index_path
        """The cached matrix file, when built by `from_documents`."""

    @classmethod
    def from_documents(
        cls,
        encoder: Encoder,
        documents: Sequence[str],
        index_dir: str | Path,
        show_progress: bool = True,
    ) -> DenseRetriever:
        path = build_index(encoder, documents, index_dir, show_progress=show_progress)
        matrix = np.load(path, mmap_mode="r")
        if matrix.shape[0] != len(documents):
            raise ValueError(f"{path}: {matrix.shape[0]} rows for {len(documents)} documents")
        return cls(encoder, np.ascontiguousarray(matrix), path)

    def search(self, query: str, k: int) -> list[Hit]:
        if k <= 0 or not query.strip():
            return []
        scores = self.matrix @ self.encoder.encode([query], "query")[0]
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(int(i), float(scores[i])) for i in top]
