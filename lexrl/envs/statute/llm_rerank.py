"""The final listwise LLM reranker (LegalMALR sec. 3.4; used at inference only).

A zero-shot chat model gets the question and the pooled candidates with their retrieval scores
and must answer strict JSON, `{"indices": [candidate numbers]}`, best first, no reasoning. A reply
that is not exactly that is re-asked (the model sees why its reply was refused) up to
`max_retries` times; after that the pool order is kept and the query is recorded as unparsable
with every refused reply, never silently reordered. Transport failures are retried by the openai
client (`max_retries` times too), through the LLM judges' client and re-ask loop
(`lexrl.rewards.judge`); one still failing after that is recorded the same way.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

import httpx

from lexrl.chat_client import make_async_client
from lexrl.envs.statute.options import FinalRerankerConfig
from lexrl.rewards.judge import JudgeParseError, ask_until_parsed
from lexrl.secrets import resolve_api_key

if TYPE_CHECKING:
    import openai

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
REASK = 'That reply was refused ({}). Answer with JSON only: {{"indices": [...]}}'


class SelectionError(JudgeParseError):
    """The reply is not the strict JSON selection; the message says what is wrong (a
    JudgeParseError, so the judges' re-ask loop refuses it)."""


@dataclass
class Candidate:
    text: str
    score: float | None


@dataclass
class RerankResult:
    order: list[int]
    """Candidate positions, final order: the model's selection, then the unselected ones in pool
    order (the pool order alone when every attempt failed)."""
    selected: int
    """How many positions the model selected (0 when every attempt failed)."""
    attempts: int
    error: str | None = None
    """Why the last attempt failed, when every attempt did."""
    refused_replies: list[str] = field(default_factory=list)
    """Every refused reply in order, then the transport failure if one (left after the openai
    client's retries) ended the attempts."""


def parse_selection(reply: str, num_candidates: int, top_k: int) -> list[int]:
    """The indices of a `{"indices": [...]}` reply (a ```json fence around it is tolerated).

    Raises SelectionError for anything else: prose, a missing key, a non-integer, an index out of
    range, a repeated index, an empty list or more than `top_k` indices.
    """
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SelectionError(f"not JSON ({error.msg} at char {error.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("indices"), list):
        raise SelectionError('expected an object {"indices": [...]}')
    indices = data["indices"]
    if not indices:
        raise SelectionError("empty selection")
    if any(isinstance(i, bool) or not isinstance(i, int) for i in indices):
        raise SelectionError("indices must be integers")
    out_of_range = [i for i in indices if not 0 <= i < num_candidates]
    if out_of_range:
        raise SelectionError(f"indices {out_of_range} outside 0..{num_candidates - 1}")
    if len(set(indices)) != len(indices):
        raise SelectionError("an index is repeated")
    if len(indices) > top_k:
        raise SelectionError(f"{len(indices)} indices, at most {top_k} asked")
    return indices


def load_prompt(language: str) -> str:
    folder = resources.files("lexrl.envs.statute") / "prompts" / language
    return (folder / "final_reranker.txt").read_text(encoding="utf-8").strip()


class LLMReranker:
    def __init__(
        self,
        config: FinalRerankerConfig,
        language: str = "en",
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.config = config
        self.system_prompt = load_prompt(language).replace("{top_k}", str(config.top_k))
        self.label = {
            "en": ("Question", "Candidates", "score"),
            "zh": ("问题", "候选法条", "分数"),
        }[language]
        self._transport = transport

    def user_message(self, query: str, candidates: Sequence[Candidate]) -> str:
        question, header, score = self.label
        lines = [f"{question}: {query}", f"{header}:"]
        for position, candidate in enumerate(candidates):
            shown = f" ({score} {candidate.score:.4f})" if candidate.score is not None else ""
            lines.append(f"[{position}]{shown} {candidate.text[: self.config.max_chars]}")
        return "\n".join(lines)

    async def rerank(
        self, client: openai.AsyncOpenAI, query: str, candidates: Sequence[Candidate]
    ) -> RerankResult:
        candidates = list(candidates[: self.config.max_candidates])
        if not candidates:
            return RerankResult(order=[], selected=0, attempts=0)
        messages = [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_message(query, candidates)},
        ]
        exchange = await ask_until_parsed(
            client,
            self.config.model,
            messages,
            lambda reply: parse_selection(reply, len(candidates), self.config.top_k),
            temperature=0.0,
            max_tokens=self.config.max_tokens,
            max_parse_retries=self.config.max_retries,
            reask=REASK.format,
        )
        if exchange.value is not None:
            selection = exchange.value
            rest = [i for i in range(len(candidates)) if i not in set(selection)]
            refused = exchange.replies[:-1]
            return RerankResult(selection + rest, len(selection), exchange.requests, None, refused)
        refused = [*exchange.replies]
        if len(exchange.replies) < exchange.requests:  # the last request got no reply
            refused.append(exchange.error)
        order = list(range(len(candidates)))
        return RerankResult(order, 0, exchange.requests, exchange.error, refused)

    async def rerank_many(
        self, items: Sequence[tuple[str, Sequence[Candidate]]], progress: bool = True
    ) -> list[RerankResult]:
        """Rerank every (query, candidates), `concurrency` requests in flight, results in order."""
        from tqdm.auto import tqdm

        semaphore = asyncio.Semaphore(self.config.concurrency)
        bar = tqdm(total=len(items), desc="final LLM reranker", disable=not progress, leave=False)
        http_client = httpx.AsyncClient(transport=self._transport) if self._transport else None
        client = make_async_client(
            self.config.base_url,
            resolve_api_key(self.config.api_key_env, self.config.model, required=False),
            self.config.timeout_s,
            self.config.max_retries,
            http_client,
        )
        async with client:

            async def one(query: str, candidates: Sequence[Candidate]) -> RerankResult:
                async with semaphore:
                    result = await self.rerank(client, query, candidates)
                bar.update(1)
                return result

            results = await asyncio.gather(*(one(q, c) for q, c in items))
        bar.close()
        return list(results)
