"""The embedding and reranking roles served over HTTP, for multi-GPU runs where one vLLM (or any
OpenAI-compatible) server holds the 4B retrieval models and every training process shares it.

- `EndpointEncoder`: `POST {base_url}/embeddings` `{"model", "input": [texts]}` (OpenAI format;
  vLLM serves it for embedding models, e.g. `--task embed` with Qwen3-Embedding-4B).
- `EndpointReranker`: `POST {base_url}/rerank` `{"model", "query", "documents"}` answered with
  `{"results": [{"index", "relevance_score"}]}` (the Jina/Cohere format vLLM serves for
  Qwen3-Reranker-4B).

`base_url` includes the version prefix (`http://host:8000/v1`). The API key, if any, is read from
the environment variable named in the config, never from the config itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import httpx
import numpy as np

from lexrl.retrieval.dense import TextKind

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """A served model failed after the retries; the message names the URL and the reply."""


def api_headers(api_key_env: str) -> dict[str, str]:
    key = os.environ.get(api_key_env, "") if api_key_env else ""
    return {"Authorization": f"Bearer {key}"} if key else {}


def post_with_retries(
    client: httpx.Client, url: str, payload: dict, max_retries: int = 3, backoff_s: float = 1.0
) -> httpx.Response:
    """POST, retrying connection errors and 408/429/5xx with exponential backoff; returns the
    first reply that is a success or a non-retryable status."""
    for attempt in range(max_retries + 1):
        try:
            reply = client.post(url, json=payload)
        except httpx.TransportError as error:
            failure = f"{type(error).__name__}: {error}"
        else:
            if reply.status_code == 200 or reply.status_code not in RETRYABLE_STATUS:
                return reply
            failure = f"HTTP {reply.status_code}: {reply.text[:300]}"
        if attempt < max_retries:
            time.sleep(backoff_s * 2**attempt)
    raise EndpointError(f"{url}: failed after {max_retries + 1} attempts; last: {failure}")


def post_json(
    client: httpx.Client, url: str, payload: dict, max_retries: int = 3, backoff_s: float = 1.0
) -> dict:
    """POST and return the JSON reply (`post_with_retries`); any other status is an error."""
    reply = post_with_retries(client, url, payload, max_retries, backoff_s)
    if reply.status_code != 200:
        raise EndpointError(f"{url}: HTTP {reply.status_code}: {reply.text[:200]}")
    try:
        return reply.json()
    except ValueError:
        raise EndpointError(f"{url}: reply is not JSON: {reply.text[:200]!r}") from None


class _Endpoint:
    """One route of an OpenAI-compatible server, with its client, key and retries."""

    def __init__(
        self,
        base_url: str,
        route: str,
        model: str,
        api_key_env: str,
        timeout_s: float,
        retries: int,
    ):
        self.name = f"endpoint:{model}"
        self.url = base_url.rstrip("/") + route
        self.model = model
        self.max_retries = retries
        self.client = httpx.Client(headers=api_headers(api_key_env), timeout=timeout_s)

    def _post(self, payload: dict) -> dict:
        return post_json(self.client, self.url, payload, self.max_retries)


class EndpointEncoder(_Endpoint):
    def __init__(
        self,
        base_url: str,
        model: str,
        query_prompt: str = "",
        batch_size: int = 64,
        api_key_env: str = "",
        timeout_s: float = 120.0,
        max_retries: int = 3,
    ):
        super().__init__(base_url, "/embeddings", model, api_key_env, timeout_s, max_retries)
        self.query_prompt = query_prompt
        self.batch_size = batch_size

    def encode(self, texts: Sequence[str], kind: TextKind) -> np.ndarray:
        if kind == "query" and self.query_prompt:
            texts = [self.query_prompt + text for text in texts]
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            reply = self._post({"model": self.model, "input": batch})
            try:
                data = sorted(reply["data"], key=lambda item: item["index"])
                vectors = [item["embedding"] for item in data]
            except (KeyError, TypeError) as error:
                raise EndpointError(
                    f"{self.url}: no data[].embedding in the reply ({error!r})"
                ) from None
            if len(vectors) != len(batch):
                raise EndpointError(f"{self.url}: {len(vectors)} embeddings for {len(batch)} texts")
            rows.extend(vectors)
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.maximum(norms, 1e-12)


class EndpointReranker(_Endpoint):
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "",
        timeout_s: float = 120.0,
        max_retries: int = 3,
    ):
        super().__init__(base_url, "/rerank", model, api_key_env, timeout_s, max_retries)

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if not documents:
            return []
        payload = {"model": self.model, "query": query, "documents": list(documents)}
        reply = self._post(payload)
        scores = [float("-inf")] * len(documents)
        try:
            for result in reply["results"]:
                scores[result["index"]] = float(result["relevance_score"])
        except (KeyError, TypeError, IndexError) as error:
            raise EndpointError(
                f"{self.url}: no results[].index/relevance_score ({error!r})"
            ) from None
        if float("-inf") in scores:
            raise EndpointError(f"{self.url}: the reply scored fewer documents than sent")
        return scores
