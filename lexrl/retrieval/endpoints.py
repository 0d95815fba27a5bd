"""The embedding and reranking roles served over HTTP, for multi-GPU runs where one vLLM (or any
OpenAI-compatible) server holds the 4B retrieval models and every training process shares it.

- `EndpointEncoder`: `POST {base_url}/embeddings` `{"model", "input": [texts]}` (OpenAI format;
  vLLM serves it for embedding models, e.g. `--task embed` with Qwen3-Embedding-4B).
- `EndpointReranker`: `POST {base_url}/rerank` `{"model", "query", "documents"}` answered with
  `{"results": [{"index", "relevance_score"}]}` (the Jina/Cohere format vLLM serves for
  Qwen3-Reranker-4B).

`base_url` includes the version prefix (`http://host:8000/v1`). The API key, if any, is read from
the environment variable named in the config, never from the config itself, and masked in the
error messages (`lexrl.secrets`).

Transport retries (connection errors, timeouts, 408/409/429/5xx, exponential backoff from 0.5 s,
Retry-After honoured) are the `openai` client's, as for the LLM judges: `/embeddings` is its
embeddings API, and `/rerank`, not an OpenAI route, goes through the same client's low-level
`post`, so both routes share one retry mechanism instead of a second hand-written one.

A server that stays away longer than the retries, or answers what is no reply, raises
EndpointError, which ends the training step and the run: every episode needs retrieval, so going
on would train on nothing. The last checkpoint is intact; resume once the server is back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai

from lexrl.errors import EndpointError
from lexrl.retrieval.dense import TextKind
from lexrl.secrets import check_url, resolve_api_key, scrub


class _Endpoint:
    """One route of an OpenAI-compatible server, with its openai client, key and retries."""

    def __init__(
        self,
        base_url: str,
        route: str,
        model: str,
        api_key_env: str,
        timeout_s: float,
        retries: int,
    ):
        check_url(base_url, f"the `{route.strip('/')}` endpoint's URL")
        self.name = f"endpoint:{model}"
        self.url = base_url.rstrip("/") + route
        self.route = route
        self.model = model
        self.max_retries = retries
        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=resolve_api_key(api_key_env, self.name, required=False),
            timeout=timeout_s,
            max_retries=retries,
        )

    def _not_json(self, error: ValueError) -> EndpointError:
        # A 200 with a body that is no JSON: a proxy's error page, or a connection cut mid-reply.
        return EndpointError(f"{self.url}: the reply is not JSON ({error})")

    def _failure(self, error: openai.APIError) -> EndpointError:
        # The reply may echo the request's key (an Authorization header shown back in an error);
        # masked before the cut, which could otherwise leave a key's first characters.
        if isinstance(error, openai.APIStatusError):
            reply = scrub(error.response.text)[:200]
            return EndpointError(f"{self.url}: HTTP {error.response.status_code}: {reply}")
        attempts = self.max_retries + 1
        return EndpointError(
            scrub(f"{self.url}: {type(error).__name__} after {attempts} attempts: {error}")
        )


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
            try:
                # "float": the client would otherwise ask for base64, which not every server has.
                reply = self.client.embeddings.create(
                    model=self.model, input=batch, encoding_format="float"
                )
            except openai.APIError as error:
                raise self._failure(error) from None
            except ValueError as error:
                raise self._not_json(error) from None
            try:
                data = sorted(reply.data, key=lambda item: item.index)
                vectors = [list(item.embedding) for item in data]
            except (AttributeError, TypeError) as error:
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
        try:
            reply = self.client.post(self.route, cast_to=object, body=payload)
        except openai.APIError as error:
            raise self._failure(error) from None
        except ValueError as error:
            raise self._not_json(error) from None
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
