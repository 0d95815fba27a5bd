"""Where a model comes from: a local folder, or the Hugging Face Hub (its local cache included).

A model that is neither fails here in one line that names the config key, the model and the ways
out, instead of a long traceback from deep inside transformers or sentence-transformers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lexrl.errors import ModelUnavailable


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def unavailable_message(key: str, name: str, reason: str) -> str:
    why = "HF_HUB_OFFLINE is set and it is not in the local cache" if offline() else reason
    hint = (
        "; `lexrl index` then encodes the corpus once, ahead of the runs"
        if "retrieval" in key
        else ""
    )
    return (
        f"`{key}`: {name!r} is not a local folder and the Hub cannot provide it ({why}); "
        "pass a local folder, or fetch it once where the Hub is reachable "
        f"(`huggingface-cli download {name}`; HF_HUB_OFFLINE=1 then loads it from the cache){hint}"
    )


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:200]


@contextmanager
def loading(key: str, name: str) -> Iterator[None]:
    """Turn the Hub's "not found / not reachable" errors while loading `name` (set by the config
    key `key`) into `ModelUnavailable`; a local folder's own errors pass through unchanged."""
    try:
        yield
    except (OSError, ValueError) as error:
        if Path(name).expanduser().exists():
            raise
        raise ModelUnavailable(unavailable_message(key, name, first_line(error))) from error
