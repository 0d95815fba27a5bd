"""Random-weight retrieval models for machines without a model hub: a Qwen3-architecture embedder
(last-token pooling, like Qwen3-Embedding) and a Qwen3 sequence-classification cross-encoder (the
form Qwen3-Reranker is served in). Their rankings are meaningless; they exercise the dense and
reranking paths end to end on a CPU, the way `model.name_or_path: tiny` does for the policy.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

import torch
from transformers import Qwen3Config, Qwen3ForSequenceClassification, Qwen3Model

from lexrl.cache_entry import build_once
from lexrl.models import LIBRARIES, code_version, save_model, save_staged, train_tokenizer

Kind = Literal["embedder", "reranker"]


def tiny_retrieval_model(
    kind: Kind, texts: list[str], cache_dir: str | Path, seed: int = 0, hidden_size: int = 64
) -> Path:
    """Folder of a tiny `kind` model whose tokenizer is trained on `texts`; built once, cached
    under a key of the settings, the texts and the code that builds it."""
    version = code_version(
        tiny_retrieval_model,
        _build,
        _write_sentence_transformer_modules,
        train_tokenizer,
        libraries=(*LIBRARIES, "sentence-transformers"),
    )
    digest = hashlib.sha256(f"{kind}:{seed}:{hidden_size}:{version}".encode())
    for text in texts:
        digest.update(text.encode() + b"\0")
    path = Path(cache_dir) / f"tiny-{kind}-{digest.hexdigest()[:16]}"
    return build_once(path, lambda entry: _build(kind, texts, seed, hidden_size, entry))


def _build(kind: Kind, texts: list[str], seed: int, hidden_size: int, path: Path) -> None:
    """Write the model and its tokenizer to `path` through a staging folder (`save_staged`)."""
    tokenizer = train_tokenizer(texts, vocab_size=2000)
    tokenizer.padding_side = "right"
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=1,
    )
    torch.manual_seed(seed)
    model = Qwen3Model(config) if kind == "embedder" else Qwen3ForSequenceClassification(config)

    def write(staging: Path) -> None:
        save_model(model, tokenizer, staging)
        if kind == "embedder":
            _write_sentence_transformer_modules(staging)

    save_staged(path, write)


def _write_sentence_transformer_modules(folder: Path) -> None:
    """Turn a transformers folder into a sentence-transformers one: last-token pooling, then
    normalisation (Qwen3-Embedding's recipe)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(folder))
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="lasttoken")
    SentenceTransformer(modules=[transformer, pooling, Normalize()]).save(str(folder))
