"""API keys: read from environment variables only, and masked in every failure message lexrl
stores or logs.

A config names the variable holding a key (`api_key_env`), never the key (`lexrl.config.validate`
refuses a config that carries credentials). `resolve_api_key` is the one place keys are read; it
remembers the variable, so that `scrub` can mask the values of every variable read so far, and
of WANDB_API_KEY, in any text: a server may echo the Authorization header into its error body,
which the `openai` client puts into the exception's message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lexrl.errors import ConfigError

MASK = "***"
_secret_variables: set[str] = {"WANDB_API_KEY"}


def remember(api_key_env: str) -> None:
    """Mask the value of the environment variable `api_key_env` from now on (`scrub`). The
    config names its key variables when it is validated, before any client reads them."""
    if api_key_env:
        _secret_variables.add(api_key_env)


def resolve_api_key(api_key_env: str, model: str, required: bool = True) -> str:
    """The key in the environment variable `api_key_env`; `EMPTY` when no variable is named (or,
    with `required=False`, when it is unset). A named but unset variable is a one-line error."""
    remember(api_key_env)
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    if key:
        return key
    if api_key_env and required:
        raise ConfigError(f"{model}: environment variable {api_key_env} (api_key_env) is not set")
    # The openai client refuses an empty key; servers without authentication ignore this one.
    return "EMPTY"


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each non-empty secret replaced by `***`. Longer secrets
    are matched first, so one that contains another is masked whole. A secret containing `*`
    could reappear from the masks themselves; API keys never contain one."""
    ordered = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not ordered:
        return text
    return re.sub("|".join(map(re.escape, ordered)), MASK, text)


def scrub(text: str) -> str:
    """`text` with the current values of WANDB_API_KEY and of every variable `resolve_api_key`
    has read masked."""
    return redact(text, (os.environ.get(name, "") for name in tuple(_secret_variables)))


def scrub_tree(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings, numbers) with `scrub` applied to every string,
    keys included; for the W&B tables and anything else handed over as structures."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_tree(k): scrub_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_tree(v) for v in value]
    return value


def write_text(path: str | Path, text: str, append: bool = False) -> None:
    """Write (or append) `text` to `path` in UTF-8 with every key masked: the one writer of
    every file lexrl produces from model, judge or server text (samples, metrics, evaluation
    files, caches)."""
    with open(path, "a" if append else "w", encoding="utf-8") as file:
        file.write(scrub(text))
