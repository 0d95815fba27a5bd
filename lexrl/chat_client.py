"""The one place OpenAI-compatible chat clients are built, and the disk cache of their replies.

The judge (`lexrl.rewards.judge`), the LLM reranker and the `openai` rollout backend all talk to
chat endpoints; they share the client (the transport retries are the openai client's, and a URL
carrying credentials is refused here, however it was configured) and the cache (one JSON file
per key, written atomically).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from lexrl.secrets import check_url, write_text

if TYPE_CHECKING:
    import httpx
    import openai


def make_async_client(
    base_url: str,
    api_key: str,
    timeout_s: float,
    max_retries: int,
    http_client: httpx.AsyncClient | None = None,
) -> openai.AsyncOpenAI:
    """The one place chat clients are built, so the transport retries are the openai client's
    (and a URL carrying credentials is refused here too, however it was configured)."""
    check_url(base_url, "a chat endpoint's `base_url`")
    # Imported here, not at the top: its import cost every process that imports an env a second.
    import openai

    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout_s,
        max_retries=max_retries,
        http_client=http_client,
    )


class DiskCache:
    """One JSON file per key under `folder/<key[:2]>/`, written to a temporary file and renamed
    (`os.replace` is atomic), so concurrent processes, even on a network file system, only ever
    read whole entries; two writers of one key write the same content."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, entry: dict) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(handle)
        try:
            # A reply may echo the request's key (a proxy that reflects headers).
            write_text(temporary, json.dumps(entry, ensure_ascii=False))
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
