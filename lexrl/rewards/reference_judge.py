"""A stand-in for a paid LLM judge on machines without one: `builtin:reference-overlap`.

LEXam's open questions are judged by GPT-4o, DeepSeek-V3 and Qwen3-32B (Fan et al. 2025, "LEXam",
arXiv:2505.12864, sec. 3.1), remote paid APIs a CPU demo or a test cannot call. The one chat model
these machines carry, SmolLM2-135M-Instruct, cannot stand in: under the paper's prompt or a
few-shot one it writes no `[[x]]` at all, and made to open `[[` it scores the reference answer
itself 0.0 (`scripts/lexam_judge_probe.py`, docs/benchmarks.md). So the stand-in is no model: it
answers the paper's LEXam judge prompt with the token F1 of the model's answer against the reference
answer, in the paper's reply format but to two decimals (`[[0.34]]`; the paper's judges use
steps of 0.1, which would round a weak policy's small overlaps all to 0.0 and leave GRPO no
signal). It is served in-process behind the OpenAI chat API (an httpx transport), so the judge
client, its parser, re-asks, cache and failure accounting run exactly as against a real
endpoint. A prompt without the LEXam blocks gets a reply without a score, which the client
counts as unparsable, as it would a real judge's.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import httpx

BUILTIN_URL = "builtin:reference-overlap"
"""The `JudgeConfig.base_url` that selects this judge."""
_SERVED_URL = "http://reference-overlap.invalid/v1"
_BLOCKS = re.compile(
    r'Reference Answer:\s*"""(?P<reference>.*?)"""\s*Model\'s Answer:\s*"""(?P<answer>.*)"""',
    re.DOTALL,
)
_WORD = re.compile(r"\w+")


def token_f1(answer: str, reference: str) -> float:
    """SQuAD's token F1 (Rajpurkar et al. 2016): the harmonic mean of the precision and recall
    of the answer's case-folded word tokens (`\\w+`, any script; `ß` folds to `ss`) against the
    reference's, each token counted as often as it occurs in both. 0.0 when either side has no
    token."""
    answer_tokens = Counter(_WORD.findall(answer.casefold()))
    reference_tokens = Counter(_WORD.findall(reference.casefold()))
    common = sum((answer_tokens & reference_tokens).values())
    if common == 0:
        return 0.0
    precision = common / sum(answer_tokens.values())
    recall = common / sum(reference_tokens.values())
    return 2 * precision * recall / (precision + recall)


def judge_reply(messages: list[dict]) -> str:
    """The stand-in's reply to a chat: for the LEXam judge prompt (its `Reference Answer` and
    `Model's Answer` blocks, in the latest user message that has them), the token F1 rounded to
    0.01 in the paper's `[[x]]` format; for any other prompt, a reply without a score."""
    users = [m.get("content") for m in reversed(messages) if m.get("role") == "user"]
    found = (_BLOCKS.search(text) for text in users if isinstance(text, str))
    blocks = next((match for match in found if match is not None), None)
    if blocks is None:
        return "The prompt has no Reference Answer and Model's Answer blocks to compare."
    f1 = token_f1(blocks["answer"], blocks["reference"])
    return f"Token F1 against the reference answer: {f1:.3f}.\nThe correctness score: [[{f1:.2f}]]"


class ReferenceOverlapTransport(httpx.AsyncBaseTransport):
    """`POST .../chat/completions` answered with `judge_reply`, in the OpenAI response shape."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": f"no route {request.url.path}"}})
        body = json.loads(await request.aread())
        reply = judge_reply(body.get("messages", []))
        completion = {
            "id": f"reference-overlap-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "reference-overlap"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        return httpx.Response(200, json=completion)


def served_endpoint() -> tuple[str, httpx.AsyncClient]:
    """The base URL and http client that route the openai client's requests to the stand-in."""
    return _SERVED_URL, httpx.AsyncClient(transport=ReferenceOverlapTransport())
