"""Base model + tokenizer + LoRA, and the built-in tiny model for machines without GPU or internet.

`load_base(config.model, corpus_text)` returns any Hugging Face causal LM and its tokenizer, or,
for `name_or_path: tiny`, a random-weight Qwen3-architecture model with a byte-level BPE tokenizer
trained on the env's own text. The tiny model is cached on disk under a key that hashes its
settings, the training text and the code that builds it (`code_version`), and rebuilding it
from the same seed gives the same weights and vocabulary, so tests and the CPU demo never touch
a model hub.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig as PeftLoraConfig
from peft import PeftModel, get_peft_model
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from lexrl.config import LoraConfig, ModelConfig
from lexrl.hub import loading

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Qwen's ChatML layout, so the tiny model renders prompts the way Qwen3-Instruct does.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


LIBRARIES = ("torch", "transformers", "tokenizers", "peft", "safetensors")


def code_version(*code: object, libraries: tuple[str, ...] = LIBRARIES) -> str:
    """Hash of the source of `code` (functions, classes, modules) and the installed versions of
    `libraries`: the part of a cache key that changes when the code building the content does
    (a cache keyed by settings alone hands an updated checkout what older code built)."""
    digest = hashlib.sha256()
    for item in code:
        digest.update(inspect.getsource(item).encode())
    for library in libraries:
        digest.update(f"{library}=={importlib.metadata.version(library)}\n".encode())
    return digest.hexdigest()


def _tiny_key(config: ModelConfig, corpus_text: list[str]) -> str:
    digest = hashlib.sha256()
    settings = (
        config.tiny_layers,
        config.tiny_hidden_size,
        config.tiny_vocab_size,
        config.tiny_seed,
        SPECIAL_TOKENS,
        CHAT_TEMPLATE,
        code_version(train_tokenizer, build_tiny_model),
    )
    digest.update(json.dumps(settings).encode())
    for text in corpus_text:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def train_tokenizer(corpus_text: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on `corpus_text`, with ChatML special tokens and chat template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_text, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    wrapped.chat_template = CHAT_TEMPLATE
    wrapped.padding_side = "left"
    return wrapped


def build_tiny_model(config: ModelConfig, corpus_text: list[str], out_dir: str | Path) -> Path:
    """Write a random-weight Qwen3 model and its tokenizer to `out_dir` (atomically)."""
    out_dir = Path(out_dir)
    tokenizer = train_tokenizer(corpus_text, config.tiny_vocab_size)
    heads = max(1, config.tiny_hidden_size // 64)
    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=config.tiny_hidden_size,
        intermediate_size=config.tiny_hidden_size * 3,
        num_hidden_layers=config.tiny_layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(config.tiny_seed)
    model = Qwen3ForCausalLM(model_config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=".tmp-"))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    replace_dir(staging, out_dir)
    return out_dir


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished folder into place so a crash never leaves a half-written one."""
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


def tiny_model_dir(config: ModelConfig, corpus_text: list[str]) -> Path:
    """The cached tiny model for these settings and text, built on first use."""
    path = Path(config.cache_dir) / f"tiny-{_tiny_key(config, corpus_text)}"
    if not (path / "config.json").is_file():
        build_tiny_model(config, corpus_text, path)
    return path


def load_base(
    config: ModelConfig, corpus_text: list[str] | None = None, path: str | Path | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the base model and tokenizer (`tiny` builds the built-in model from `corpus_text`)."""
    if path is None:
        if config.name_or_path == "tiny":
            if not corpus_text:
                raise ValueError(
                    "model.name_or_path=tiny needs the env's text to train its tokenizer"
                )
            path = tiny_model_dir(config, corpus_text)
        else:
            path = config.name_or_path
    with loading("model.name_or_path", str(path)):
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, config.dtype))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def add_lora(model: PreTrainedModel, config: LoraConfig, seed: int) -> PeftModel:
    """Freeze the base and attach a fresh LoRA adapter (same seed -> same initial adapter)."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    torch.manual_seed(seed)
    peft_config = PeftLoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, peft_config)
