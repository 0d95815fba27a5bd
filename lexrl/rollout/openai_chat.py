"""The `openai` backend: the policy is any OpenAI-compatible chat endpoint, for evaluation.

GPT-4o, a Qwen3 behind someone's vLLM server, or `lexrl serve` of a local model play every
agent of an env's workflow; each agent call is one chat completion of the messages the env
built (system prompt first). The Turn keeps the reply's text; with `rollout.chat_token_ids` (a
vLLM server) also the prompt's and the completion's token ids and the sampler's log-probs.

Transport, concurrency and caching are the judge client's (`lexrl.rewards.judge`): the `openai`
client's retries (connection errors, timeouts, 408/409/429/5xx, exponential backoff,
Retry-After), at most `chat_concurrency` requests in flight, and an on-disk cache of replies
(`chat_cache_dir`) so an evaluation run again, or resumed after a crash, pays for no call twice.
A call still failing after the retries fails its episode (`EpisodeCallFailed`): the engine
records it as a failed trajectory, counted and left out of the means, never scored 0, and the
evaluation goes on. Training from such a backend is refused: it has no weights to update.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import openai

from lexrl.chat_client import DiskCache, make_async_client
from lexrl.errors import ConfigError, EpisodeCallFailed
from lexrl.generation import Completion, Sampling, current_call
from lexrl.secrets import api_base_url, check_url, resolve_api_key, scrub

SECONDS_PER_TOKEN = 0.5
"""Seconds a request may take per completion token it is allowed: 2 tokens a second. A 2-core
CPU vLLM server of SmolLM2-135M gave each of 2 concurrent requests 6 to 10 tokens a second, and
`chat_concurrency` puts up to 16 on it. A GPU server or a paid API is faster; the allowance only
lengthens the wait for a server that hangs (a refused connection fails at once).
`rollout.chat_timeout_s` stays the floor."""


def request_timeout(timeout_s: float, max_tokens: int) -> float:
    """The per-request timeout for a completion of at most `max_tokens`: `timeout_s`, or longer
    when the cap needs it (`max_tokens` x `SECONDS_PER_TOKEN`). A fixed timeout fails every long
    reply of a slow server at the same second, however many retries follow."""
    return max(timeout_s, max_tokens * SECONDS_PER_TOKEN)


@dataclass(frozen=True)
class ChatEndpoint:
    base_url: str
    """With the version prefix (`https://api.openai.com/v1`)."""
    model: str
    api_key_env: str = ""
    concurrency: int = 16
    timeout_s: float = 120.0
    """The floor of each request's timeout (`request_timeout`)."""
    max_retries: int = 3
    token_ids: bool = False
    """Ask a vLLM server for token ids and log-probs (`return_token_ids`, `logprobs`)."""
    cache_dir: str = ""
    """Empty: no cache."""


def reply_key(endpoint: ChatEndpoint, messages: list[dict], sampling: Sampling, call: str) -> str:
    """sha256 of what decides a reply: the endpoint and model, the messages, the sampling and
    which call of which episode it is (the K samples of one prompt are different replies)."""
    payload = {
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "messages": messages,
        "temperature": sampling.temperature,
        "max_tokens": sampling.max_new_tokens,
        "token_ids": endpoint.token_ids,
        "call": call,
    }
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def parse_choice(completion: openai.types.chat.ChatCompletion, token_ids: bool) -> dict:
    """Text, prompt ids, completion ids and log-probs of the first choice (ids and log-probs
    empty unless `token_ids` and the server returned them, one log-prob per id)."""
    choice = completion.choices[0]
    text = choice.message.content or ""
    entry = {"text": text, "prompt_ids": [], "completion_ids": [], "logprobs": []}
    if not token_ids:
        return entry
    extra = completion.model_extra or {}
    ids = (choice.model_extra or {}).get("token_ids") or []
    logprobs = [item.logprob for item in (choice.logprobs.content or [])] if choice.logprobs else []
    if ids and len(ids) == len(logprobs):
        entry.update(
            prompt_ids=list(extra.get("prompt_token_ids") or []),
            completion_ids=[int(i) for i in ids],
            logprobs=[float(v) for v in logprobs],
        )
    return entry


class OpenAIChatBackend:
    """A chat-level backend (`lexrl.policy.ChatBackend`); the trainer's hooks are no-ops
    because nothing here is trained."""

    adapter_version = 0
    needs_adapter_files = False
    shared_by_processes = True

    def __init__(self, endpoint: ChatEndpoint):
        if not endpoint.base_url:
            raise ConfigError("`rollout.backend: openai` needs `rollout.base_url`")
        # The openai client would send a URL's `user:password@` as Basic auth in place of the
        # key in `api_key_env`, where an echoing server puts it into replies and the cache.
        check_url(endpoint.base_url, "`rollout.base_url`")
        # `http://host:8000` and `http://host:8000/v1` name the same server.
        self.endpoint = endpoint = dataclasses.replace(
            endpoint, base_url=api_base_url(endpoint.base_url)
        )
        self.api_key = resolve_api_key(
            endpoint.api_key_env,
            "rollout.api_key_env",
            base_url=endpoint.base_url,
            flag="--rollout.api_key_env",
        )
        self.cache = DiskCache(endpoint.cache_dir) if endpoint.cache_dir else None
        self._client: openai.AsyncOpenAI | None = None
        self._limit: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stats = {"requests": 0, "cache_hits": 0, "failures": 0}

    def _session(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        # The engine runs each rollout in a fresh event loop; a client and a semaphore belong
        # to the loop that first used them.
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._client is None or self._limit is None:
            self._client = make_async_client(
                self.endpoint.base_url,
                self.api_key,
                self.endpoint.timeout_s,
                self.endpoint.max_retries,
            )
            self._limit = asyncio.Semaphore(self.endpoint.concurrency)
            self._loop = loop
        return self._client, self._limit

    async def chat(self, messages: list[dict[str, str]], sampling: Sampling) -> Completion:
        key = reply_key(self.endpoint, messages, sampling, current_call())
        entry = self.cache.get(key) if self.cache else None
        if entry is not None:
            self.stats["cache_hits"] += 1
        else:
            entry = await self._ask(messages, sampling)
            if self.cache:
                self.cache.put(key, entry)
        return Completion(
            entry["completion_ids"],
            entry["logprobs"],
            adapter_version=self.adapter_version,
            text=entry["text"],
            prompt_ids=entry["prompt_ids"] or None,
        )

    async def _ask(self, messages: list[dict[str, str]], sampling: Sampling) -> dict:
        client, limit = self._session()
        extra = {"return_token_ids": True} if self.endpoint.token_ids else None
        async with limit:
            self.stats["requests"] += 1
            try:
                completion = await client.chat.completions.create(
                    model=self.endpoint.model,
                    messages=messages,
                    temperature=sampling.temperature,
                    max_tokens=sampling.max_new_tokens,
                    logprobs=True if self.endpoint.token_ids else None,
                    extra_body=extra,
                    timeout=request_timeout(self.endpoint.timeout_s, sampling.max_new_tokens),
                )
                return parse_choice(completion, self.endpoint.token_ids)
            except openai.APIError as error:
                reason = f"{type(error).__name__}: {error}"
            except (AttributeError, IndexError, TypeError, ValueError) as error:
                # A 200 that is no completion (no choices, another shape, a proxy's page).
                reason = f"malformed completion ({error!r})"
        self.stats["failures"] += 1
        raise EpisodeCallFailed(scrub(f"policy {self.endpoint.base_url}: {reason}"))

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        raise ConfigError("`rollout.backend: openai` takes chat messages, not token ids")

    def load_adapter(self, adapter_dir: Path, version: int) -> None:
        raise ConfigError("`rollout.backend: openai` serves a fixed model: no adapter to load")

    def use_adapter(self, version: int, adapter_dir: Path | None = None) -> None:
        raise ConfigError("`rollout.backend: openai` serves a fixed model: no adapter to use")

    def release_memory(self) -> None:
        """Nothing is held locally."""

    def resume(self) -> None:
        """Nothing is held locally."""
