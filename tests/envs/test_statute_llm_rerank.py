"""The final LLM reranker's parsing, retries and records. Its model is a remote paid API in the
paper (Qwen-Max), so an httpx MockTransport answers here with scripted replies; transport retries
are the openai client's (a tiny Retry-After keeps its 0.5 s backoff out of the tests)."""

import asyncio
import json

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.envs.statute.llm_rerank import Candidate, LLMReranker, SelectionError, parse_selection
from lexrl.envs.statute.options import FinalRerankerConfig

CANDIDATES = [Candidate(f"Article {i} text", 1.0 - i / 10) for i in range(5)]


def test_parse_selection_accepts_strict_json_and_a_json_fence():
    assert parse_selection('{"indices": [3, 0, 1]}', 5, 3) == [3, 0, 1]
    assert parse_selection('```json\n{"indices": [4]}\n```', 5, 3) == [4]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('Sure! {"indices": [1]}', "not JSON"),
        ('{"selected": [1]}', "expected an object"),
        ('{"indices": []}', "empty selection"),
        ('{"indices": [1, "2"]}', "integers"),
        ('{"indices": [true]}', "integers"),
        ('{"indices": [5]}', r"\[5\] outside 0\.\.4"),
        ('{"indices": [1, 1]}', "repeated"),
        ('{"indices": [0, 1, 2, 3]}', "4 indices, at most 3"),
    ],
)
def test_parse_selection_refuses_anything_else(reply, reason):
    with pytest.raises(SelectionError, match=reason):
        parse_selection(reply, 5, 3)


@given(st.text(max_size=60))
def test_parse_selection_raises_only_selection_errors(reply):
    try:
        indices = parse_selection(reply, 5, 3)
    except SelectionError:
        return
    assert 1 <= len(indices) <= 3 and all(0 <= i < 5 for i in indices)


def scripted_server(replies):
    """A transport that answers each request with the next scripted (status, content)."""
    requests = []

    def handle(request):
        requests.append(json.loads(request.content))
        status, content = replies[len(requests) - 1]
        if status != 200:
            return httpx.Response(status, json={"error": content}, headers={"retry-after-ms": "1"})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

    return httpx.MockTransport(handle), requests


def rerank(replies, **overrides):
    transport, requests = scripted_server(replies)
    config = FinalRerankerConfig(
        model="qwen-max", base_url="http://api.test/v1", top_k=3, **overrides
    )
    reranker = LLMReranker(config, "en", transport=transport)
    [result] = asyncio.run(reranker.rerank_many([("deposit?", CANDIDATES)], progress=False))
    return result, requests


def test_selection_then_the_rest_in_pool_order():
    result, requests = rerank([(200, '{"indices": [2, 4]}')])
    assert result.order == [2, 4, 0, 1, 3] and result.selected == 2 and result.error is None
    user = requests[0]["messages"][1]["content"]
    assert "[0] (score 1.0000) Article 0 text" in user and "Question: deposit?" in user
    assert "3" in requests[0]["messages"][0]["content"] and requests[0]["temperature"] == 0.0


def test_an_unparsable_reply_is_re_asked_with_the_reason():
    result, requests = rerank([(200, "Article 2 looks best."), (200, '{"indices": [1]}')])
    assert result.order[0] == 1 and result.attempts == 2
    assert result.refused_replies == ["Article 2 looks best."]
    follow_up = requests[1]["messages"]
    assert follow_up[2] == {"role": "assistant", "content": "Article 2 looks best."}
    assert "refused (not JSON" in follow_up[3]["content"]


def test_after_the_re_asks_the_pool_order_is_kept_and_recorded():
    result, requests = rerank(
        [(503, "busy"), (200, '{"indices": [9]}'), (200, "no"), (200, "{}")], max_retries=2
    )
    assert len(requests) == 4, "the 503 is retried by the client, then two re-asks"
    assert result.order == [0, 1, 2, 3, 4] and result.selected == 0 and result.attempts == 3
    assert result.error.startswith("unparsable after 3 replies: expected an object")
    assert result.refused_replies == ['{"indices": [9]}', "no", "{}"]
    assert len(requests[3]["messages"]) == 6


def test_a_transport_failure_after_the_client_retries_keeps_the_pool_order():
    result, requests = rerank(
        [(200, "no"), (503, "busy"), (503, "busy"), (200, '{"indices": [1]}')], max_retries=1
    )
    assert len(requests) == 3 and result.attempts == 2
    assert result.order == [0, 1, 2, 3, 4] and result.selected == 0
    assert result.error.startswith("InternalServerError: Error code: 503")
    assert result.refused_replies == ["no", result.error]


def test_a_client_error_is_not_retried():
    result, requests = rerank([(401, "bad key"), (200, '{"indices": [1]}')])
    assert len(requests) == 1 and result.error.startswith("AuthenticationError: Error code: 401")
    assert result.order == [0, 1, 2, 3, 4]
