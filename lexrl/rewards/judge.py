"""LLM judges behind any OpenAI-compatible chat endpoint (vLLM, a commercial API), for rewards
scored by a model (LEXam open questions, sec. 4 of the design notes).

A `JudgeClient` asks every configured judge the same messages, parses each reply into a score,
and aggregates the judges (LEXam: the per-item minimum). One retry mechanism for the transport,
the `openai` client's own (connection errors, timeouts, 408/409/429/5xx with exponential backoff
and Retry-After); on top of it, an unparsable reply is re-asked with the reason, and a 200 that
is no completion (no choices, a body that is not JSON) is asked again. A judge that
still fails makes the whole sample failed, with score None: callers exclude it from training and
metrics (`judge/failed`) instead of scoring it 0; its stored reason names the judge's URL and is
scrubbed of API keys (`lexrl.secrets`). Parsed scores are cached on disk, one JSON file per key
written atomically and scrubbed, so a re-evaluation in another process pays nothing twice.

    judges = [JudgeConfig("http://host:8000/v1", "Qwen/Qwen3-32B")]
    client = JudgeClient(judges, cache_dir=".lexrl_cache/judge")
    result = await client.score(messages, parse_bracket_score)  # result.score, result.failed
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import httpx

from lexrl.chat_client import DiskCache, make_async_client
from lexrl.rewards import reference_judge
from lexrl.rewards.judge_config import JudgeConfig
from lexrl.secrets import resolve_api_key, scrub

if TYPE_CHECKING:
    import openai

T = TypeVar("T")

BRACKET_FORMAT = "End your reply with the score from 0.0 to 1.0 in double brackets, e.g. [[0.7]]."
_BRACKET = re.compile(r"\[\[\s*([0-9]+(?:\.[0-9]+)?)\s*\]\]")
_BRACKET_PARITY = re.compile(r"\[\[(\d.\d)\]\]")
_THINK_END = "</think>"


class JudgeParseError(ValueError):
    """A reply cannot be parsed; the message is the reason, shown to the model when re-asked."""


@dataclass
class JudgeCall:
    judge: str
    """The judge's model name."""
    messages: list[dict]
    """The conversation as sent, re-asks and refused replies included."""
    reply: str | None
    """The final reply (None when the transport failed before any)."""
    score: float | None
    """The parsed score; None when the call failed."""
    error: str | None = None
    """Why the call failed, after the judge's URL (`http://host:8000/v1: unparsable after 3
    replies: ...`, `http://host:8000/v1: APIConnectionError: ...`); scrubbed of API keys."""
    cached: bool = False
    """Served from the on-disk cache, no request sent."""
    attempts: int = 0
    """Chat requests this call sent (0 when cached; transport retries inside one not counted)."""


@dataclass
class JudgeResult:
    score: float | None
    """The judges' scores aggregated; None when any judge failed (never 0 for a failure)."""
    failed: bool
    """A judge failed: exclude the sample from training and metrics."""
    calls: list[JudgeCall] = field(default_factory=list)
    """One per judge, in configuration order."""


@dataclass
class Exchange(Generic[T]):
    """What `ask_until_parsed` got: the parsed value, or why there is none."""

    messages: list[dict]
    """The conversation as sent, re-asks included."""
    replies: list[str]
    """Every reply, in order; all but the last were refused."""
    value: T | None
    """The parsed last reply; None when it failed."""
    error: str | None
    """Transport failure or the last parse failure; None on success."""
    requests: int
    """Chat requests sent."""


def strip_thinking(text: str) -> str:
    """The text after the last `</think>`, or the whole text when there is none."""
    return text.rpartition(_THINK_END)[2]


def parse_bracket_score(text: str) -> float:
    """LEXam's judge rubric: the LAST `[[x]]` after any thinking, x a number from 0 to 1
    (`[[0.7]]`, `[[1]]`, `[[1.0]]`, `[[ 0.7 ]]`).

    Raises JudgeParseError (and nothing else) when there is no such score or it is outside [0, 1].
    """
    matches = _BRACKET.findall(strip_thinking(text))
    if not matches:
        raise JudgeParseError("no [[x.x]] score, x a number from 0.0 to 1.0")
    value = float(matches[-1])
    if not 0.0 <= value <= 1.0:
        raise JudgeParseError(f"the score [[{matches[-1]}]] is not a number from 0.0 to 1.0")
    return value


def parse_bracket_score_lexam_parity(text: str) -> float:
    """The LEXam authors' scorer, for parity with their reported numbers: the FIRST match of
    `\\[\\[(\\d.\\d)\\]\\]` (one digit, any character, one digit) in the reply as given; no match,
    an unparsable number (`[[1x2]]`) or a value outside [0, 1] scores 0.0. Never raises."""
    match = _BRACKET_PARITY.search(text)
    if match is None:
        return 0.0
    try:
        value = float(match.group(1))
    except ValueError:
        return 0.0
    return value if 0.0 <= value <= 1.0 else 0.0


async def ask_until_parsed(
    client: openai.AsyncOpenAI,
    model: str,
    messages: list[dict],
    parser: Callable[[str], T],
    *,
    temperature: float,
    max_tokens: int,
    max_parse_retries: int,
    reask: Callable[[str], str],
) -> Exchange[T]:
    """Ask, parse, and re-ask up to `max_parse_retries` times while `parser` raises
    JudgeParseError (the refused reply and `reask(reason)` are appended to the conversation) or
    the answer is a malformed completion (the same conversation is sent again). Transport
    failures left after the client's own retries end the exchange with an error."""
    import openai

    replies: list[str] = []
    refused: str | None = None
    failure = ""
    for attempt in range(max_parse_retries + 1):
        if refused is not None:
            messages = [
                *messages,
                {"role": "assistant", "content": replies[-1]},
                {"role": "user", "content": reask(refused)},
            ]
            refused = None
        try:
            completion = await client.chat.completions.create(
                model=model, messages=messages, temperature=temperature, max_tokens=max_tokens
            )
            reply = completion.choices[0].message.content or ""
        except openai.APIError as error:
            # The message may carry the server's error body, which can echo the request's key.
            failure = scrub(f"{type(error).__name__}: {error}")
            return Exchange(messages, replies, None, failure, attempt + 1)
        except (AttributeError, IndexError, TypeError, ValueError) as error:
            # A 200 that is no completion: no choices (a content filter), another shape, or a
            # body that is not JSON (a proxy's error page, a cut connection). It says nothing
            # about the judge's answer, and an overloaded server or proxy may recover.
            failure = scrub(f"malformed completion ({error!r})")
            continue
        replies.append(reply)
        try:
            return Exchange(messages, replies, parser(reply), None, attempt + 1)
        except JudgeParseError as error:
            refused = str(error)
            failure = f"unparsable after {len(replies)} replies: {refused}"
    return Exchange(messages, replies, None, failure, max_parse_retries + 1)


def cache_key(config: JudgeConfig, messages: list[dict], parser: Callable[[str], float]) -> str:
    """sha256 of the model, the original messages, the sampling parameters and the parser: a
    strict and a parity parser read the same reply differently, so they do not share scores."""
    parser_name = f"{getattr(parser, '__module__', '')}.{getattr(parser, '__qualname__', parser)}"
    payload = {
        "model": config.model,
        "messages": messages,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "parser": parser_name,
    }
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class JudgeClient:
    """An ensemble of judges, each with its own openai client and bounded concurrency.

    Use it from one event loop: the semaphores and the clients' connection pools belong to the
    loop that first uses them.
    """

    def __init__(
        self,
        judges: list[JudgeConfig],
        cache_dir: str | Path | None,
        aggregate: Literal["min", "mean"] = "min",
        http_client_factory: Callable[[], httpx.AsyncClient] | None = None,
    ):
        if not judges:
            raise ValueError("JudgeClient needs at least one judge")
        if aggregate not in ("min", "mean"):
            raise ValueError(f"aggregate must be 'min' or 'mean', not {aggregate!r}")
        self.judges = list(judges)
        self.aggregate = aggregate
        self.cache = DiskCache(cache_dir) if cache_dir is not None else None
        self.clients = [self._client(judge, http_client_factory) for judge in self.judges]
        self.semaphores = [asyncio.Semaphore(judge.concurrency) for judge in self.judges]
        self._stats = {"requests": 0, "cache_hits": 0, "parse_retries": 0, "failures": 0}

    @staticmethod
    def _client(
        judge: JudgeConfig, http_client_factory: Callable[[], httpx.AsyncClient] | None
    ) -> openai.AsyncOpenAI:
        if judge.base_url == reference_judge.BUILTIN_URL:
            base_url, http_client = reference_judge.served_endpoint()
            return make_async_client(
                base_url, "EMPTY", judge.timeout_s, judge.max_retries, http_client
            )
        return make_async_client(
            judge.base_url,
            resolve_api_key(
                judge.api_key_env,
                f"judge {judge.model}",
                base_url=judge.base_url,
            ),
            judge.timeout_s,
            judge.max_retries,
            http_client_factory() if http_client_factory else None,
        )

    def stats(self) -> dict[str, int]:
        """Counters since construction: chat `requests` sent (each may hide transport retries),
        `cache_hits`, `parse_retries` (re-asks) and `failures` (failed judge calls)."""
        return dict(self._stats)

    async def aclose(self) -> None:
        for client in self.clients:
            await client.close()

    async def score(
        self,
        messages: list[dict],
        parser: Callable[[str], float],
        format_hint: str = BRACKET_FORMAT,
    ) -> JudgeResult:
        """Every judge's score for `messages`, aggregated; `failed` (score None) if any judge
        failed. `format_hint` follows the reason in a re-ask."""
        calls = await asyncio.gather(
            *(self._judge(i, messages, parser, format_hint) for i in range(len(self.judges)))
        )
        scores = [call.score for call in calls]
        if any(score is None for score in scores):
            return JudgeResult(None, True, list(calls))
        combined = min(scores) if self.aggregate == "min" else math.fsum(scores) / len(scores)
        return JudgeResult(combined, False, list(calls))

    async def ask(
        self,
        messages: list[dict],
        parser: Callable[[str], Any],
        format_hint: str,
        judge: int = 0,
    ) -> JudgeCall:
        """One judge's parsed reply, for rubrics whose result is not a score (a verdict label,
        extracted factor lists): cached, retried and re-asked like `score`; `call.score` holds
        the parsed value (JSON-serialisable), None when the call failed."""
        return await self._judge(judge, messages, parser, format_hint)

    async def _judge(
        self, index: int, messages: list[dict], parser: Callable[[str], float], format_hint: str
    ) -> JudgeCall:
        config = self.judges[index]
        key = cache_key(config, messages, parser)
        entry = self.cache.get(key) if self.cache else None
        if entry is not None:
            self._stats["cache_hits"] += 1
            return JudgeCall(
                config.model, entry["messages"], entry["reply"], entry["score"], cached=True
            )
        async with self.semaphores[index]:
            exchange = await ask_until_parsed(
                self.clients[index],
                config.model,
                messages,
                parser,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                max_parse_retries=config.max_parse_retries,
                reask=lambda reason: f"Your reply was refused ({reason}). {format_hint}",
            )
        self._stats["requests"] += exchange.requests
        self._stats["parse_retries"] += max(exchange.requests - 1, 0)
        reply = exchange.replies[-1] if exchange.replies else None
        # The URL first: a run halted by failing episodes, and the evaluation reports, name the
        # judge to fix. A refused reply quoted in the reason may echo the key, hence the scrub.
        error = None if exchange.error is None else scrub(f"{config.base_url}: {exchange.error}")
        call = JudgeCall(
            config.model,
            exchange.messages,
            reply,
            exchange.value,
            error,
            False,
            exchange.requests,
        )
        if exchange.error is not None:
            self._stats["failures"] += 1
        elif self.cache:
            self.cache.put(key, {"messages": call.messages, "reply": reply, "score": call.score})
        return call
