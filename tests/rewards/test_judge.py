"""The LLM-judge client against an in-process OpenAI-compatible server (an httpx MockTransport
that stands in for a remote endpoint; a real vLLM judge is a slow test elsewhere)."""

import asyncio
import json
import time
from dataclasses import asdict

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.rewards.judge import (
    JudgeClient,
    JudgeConfig,
    JudgeParseError,
    parse_bracket_score,
    parse_bracket_score_lexam_parity,
    strip_thinking,
)

MESSAGES = [
    {"role": "system", "content": "Grade the answer against the reference."},
    {"role": "user", "content": "Question: ... Reference: ... Answer: ..."},
]
# A tiny Retry-After keeps the openai client's backoff (0.5 s and up) out of the 5xx tests.
FAST_RETRY = {"retry-after-ms": "1"}


class FakeServer:
    """Answers `/chat/completions` per model from a script: a list of replies (or of
    `(status, text)` for an error, or an Exception to raise), one per request."""

    def __init__(self, scripts: dict[str, list], delay_s: float = 0.0):
        self.scripts = {model: list(script) for model, script in scripts.items()}
        self.requests: list[dict] = []
        self.delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        script = self.scripts[body["model"]]
        step = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, tuple):
            return httpx.Response(step[0], json={"error": step[1]}, headers=FAST_RETRY)
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}}
        choice["message"]["content"] = step
        return httpx.Response(
            200, json={"id": "c", "object": "chat.completion", "created": 0, "choices": [choice]}
        )

    def http_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handle))


def judges(*models, **overrides):
    return [JudgeConfig("http://judge.test/v1", model, **overrides) for model in models]


def run_scores(server, configs, message_sets, cache_dir=None, aggregate="min", parser=None):
    """Score every message set in one event loop; returns (results, client stats)."""

    async def main():
        client = JudgeClient(configs, cache_dir, aggregate, http_client_factory=server.http_client)
        results = await asyncio.gather(
            *(client.score(m, parser or parse_bracket_score) for m in message_sets)
        )
        await client.aclose()
        return results, client.stats()

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Good. [[0.7]]", 0.7),
        ("[[1]]", 1.0),
        ("[[1.0]]", 1.0),
        ("[[ 0.7 ]]", 0.7),
        ("first [[0.2]] then, corrected: [[0.4]]", 0.4),
        ("<think>maybe [[0.9]]</think>Final: [[0.3]]", 0.3),
        ("<think>[[0.9]]</think><think>[[0.8]]</think> [[0]]", 0.0),
    ],
)
def test_parse_bracket_score_takes_the_last_score_after_thinking(text, score):
    assert parse_bracket_score(text) == score


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Score: 0.7", r"no \[\[x\.x\]\] score"),
        ("<think>[[0.9]]</think> no score here", r"no \[\[x\.x\]\] score"),
        ("[[1.5]]", r"\[\[1\.5\]\] is not a number from 0\.0 to 1\.0"),
        ("[[0.7]] then [[7]]", r"\[\[7\]\]"),
    ],
)
def test_parse_bracket_score_says_what_it_expected(text, reason):
    with pytest.raises(JudgeParseError, match=reason):
        parse_bracket_score(text)


@given(st.text(max_size=80))
def test_parse_bracket_score_raises_only_parse_errors(text):
    try:
        score = parse_bracket_score(text)
    except JudgeParseError:
        return
    assert 0.0 <= score <= 1.0


@given(st.text(max_size=40), st.integers(0, 10))
def test_parse_bracket_score_reads_back_a_written_score(prefix, tenths):
    value = tenths / 10
    assert parse_bracket_score(f"{prefix} [[{value:.1f}]]") == value


@given(st.text(alphabet=st.sampled_from("[]0.1x5 </think>"), max_size=40) | st.text(max_size=80))
def test_parity_scorer_never_raises(text):
    assert 0.0 <= parse_bracket_score_lexam_parity(text) <= 1.0


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("[[0.2]] then [[0.4]]", 0.2),
        ("[[1]]", 0.0),
        ("[[1x2]]", 0.0),
        ("[[1,0]]", 0.0),
        ("[[1.5]]", 0.0),
        ("[[ 0.7 ]]", 0.0),
        ("<think>[[0.9]]</think>[[0.3]]", 0.9),
        ("no score", 0.0),
    ],
)
def test_parity_scorer_is_the_authors_first_d_d_match(text, score):
    assert parse_bracket_score_lexam_parity(text) == score


def test_strip_thinking_keeps_the_text_after_the_last_think():
    assert strip_thinking("a</think>b</think> c") == " c"
    assert strip_thinking("no thinking") == "no thinking"


@pytest.mark.parametrize(("aggregate", "expected"), [("min", 0.4), ("mean", 0.6)])
def test_ensemble_aggregates_the_judges(aggregate, expected):
    server = FakeServer({"a": ["[[0.8]]"], "b": ["[[0.4]]"], "c": ["[[0.6]]"]})
    [result], stats = run_scores(server, judges("a", "b", "c"), [MESSAGES], aggregate=aggregate)
    assert result.score == pytest.approx(expected) and not result.failed
    assert [call.score for call in result.calls] == [0.8, 0.4, 0.6]
    assert stats["requests"] == 3 and len(server.requests) == 3
    assert server.requests[0]["temperature"] == 0.0 and server.requests[0]["max_tokens"] == 512


def test_an_unparsable_reply_is_re_asked_with_the_reason():
    server = FakeServer({"a": ["Looks fine to me.", "[[0.6]]"]})
    [result], stats = run_scores(server, judges("a"), [MESSAGES])
    assert result.score == 0.6 and result.calls[0].attempts == 2
    follow_up = server.requests[1]["messages"]
    assert follow_up[:2] == MESSAGES
    assert follow_up[2] == {"role": "assistant", "content": "Looks fine to me."}
    assert "no [[x.x]] score" in follow_up[3]["content"] and "[[0.7]]" in follow_up[3]["content"]
    assert result.calls[0].messages == follow_up
    assert stats == {"requests": 2, "cache_hits": 0, "parse_retries": 1, "failures": 0}


def test_a_failed_judge_fails_the_sample_with_no_score(tmp_path):
    server = FakeServer({"a": ["[[0.9]]"], "b": ["no", "still no", "[[2.0]]"]})
    [result], stats = run_scores(server, judges("a", "b"), [MESSAGES], tmp_path)
    assert result.failed and result.score is None
    failed = result.calls[1]
    assert failed.score is None and failed.reply == "[[2.0]]" and failed.attempts == 3
    assert failed.error.startswith(
        "http://judge.test/v1: unparsable after 3 replies: the score [[2.0]]"
    )
    assert failed.messages == server.requests[-1]["messages"] and len(failed.messages) == 6
    assert stats["failures"] == 1 and stats["parse_retries"] == 2
    json.dumps([asdict(call) for call in result.calls])
    # Only the parsed judge was cached: the failed one is asked again.
    server.scripts["b"] = ["[[0.5]]"]
    [again], stats = run_scores(server, judges("a", "b"), [MESSAGES], tmp_path)
    assert again.score == 0.5 and [c.cached for c in again.calls] == [True, False]
    assert stats["requests"] == 1


def test_a_second_evaluation_is_served_from_the_cache(tmp_path):
    server = FakeServer({"a": ["maybe", "[[0.3]]"], "b": ["[[0.5]]"]})
    other = [MESSAGES[0], {"role": "user", "content": "another answer"}]

    async def main():
        client = JudgeClient(judges("a", "b"), tmp_path, http_client_factory=server.http_client)
        first = await client.score(MESSAGES, parse_bracket_score)
        sent = len(server.requests)
        second = await client.score(MESSAGES, parse_bracket_score)
        assert len(server.requests) == sent == 3
        await client.aclose()
        return first, second, client.stats()

    first, second, stats = asyncio.run(main())
    assert first.score == second.score == 0.3 and not second.failed
    assert all(call.cached and call.attempts == 0 for call in second.calls)
    assert second.calls[0].messages == first.calls[0].messages
    assert stats["cache_hits"] == 2 and stats["requests"] == 3
    # A new client (a re-evaluation in another process) reads the same files.
    [third], stats = run_scores(server, judges("a", "b"), [MESSAGES], tmp_path)
    assert third.score == 0.3 and len(server.requests) == 3 and stats["requests"] == 0
    # Other messages, another parser or another temperature are other keys.
    run_scores(server, judges("a", "b"), [other], tmp_path)
    run_scores(
        server, judges("a", "b"), [MESSAGES], tmp_path, parser=parse_bracket_score_lexam_parity
    )
    run_scores(server, judges("a", "b", temperature=0.5), [MESSAGES], tmp_path)
    assert len(server.requests) == 9


def test_requests_in_flight_are_bounded_per_judge():
    server = FakeServer({"a": ["[[0.5]]"]}, delay_s=0.02)
    message_sets = [[{"role": "user", "content": f"answer {i}"}] for i in range(12)]
    results, stats = run_scores(server, judges("a", concurrency=3), message_sets)
    assert all(result.score == 0.5 for result in results) and stats["requests"] == 12
    assert server.max_in_flight == 3


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        ((500, "overloaded"), "InternalServerError: Error code: 500"),
        (httpx.RemoteProtocolError("Server disconnected"), "APIConnectionError: Connection error"),
        (httpx.ReadTimeout("timed out"), "APITimeoutError: Request timed out"),
    ],
)
def test_transport_failures_are_retried_by_the_client_then_fail_the_sample(failure, error):
    server = FakeServer({"a": [failure]})
    start = time.perf_counter()
    [result], stats = run_scores(server, judges("a", max_retries=1), [MESSAGES])
    assert time.perf_counter() - start < 5
    assert len(server.requests) == 2, "one try and one retry by the openai client"
    assert result.failed and result.score is None
    assert result.calls[0].error.startswith(f"http://judge.test/v1: {error}")
    assert result.calls[0].reply is None
    assert stats["failures"] == 1 and stats["requests"] == 1


def test_a_transient_500_is_retried_and_succeeds():
    server = FakeServer({"a": [(503, "loading"), "[[0.8]]"]})
    [result], stats = run_scores(server, judges("a", max_retries=2), [MESSAGES])
    assert result.score == 0.8 and len(server.requests) == 2 and stats["requests"] == 1


def test_a_missing_api_key_names_the_variable_and_the_judge(monkeypatch):
    monkeypatch.delenv("LEXRL_TEST_JUDGE_KEY", raising=False)
    config = JudgeConfig("http://judge.test/v1", "gpt-4o", api_key_env="LEXRL_TEST_JUDGE_KEY")
    with pytest.raises(
        ValueError, match=r"judge gpt-4o: environment variable LEXRL_TEST_JUDGE_KEY"
    ):
        JudgeClient([config], None)


def test_a_judge_on_this_machine_needs_no_key(monkeypatch, capsys):
    # A paper's judge config names OpenAI's key; pointed at a local server it must still start.
    monkeypatch.delenv("LEXRL_TEST_JUDGE_KEY", raising=False)
    config = JudgeConfig("http://127.0.0.1:8000/v1", "m", api_key_env="LEXRL_TEST_JUDGE_KEY")
    JudgeClient([config], None)
    assert "LEXRL_TEST_JUDGE_KEY (api_key_env) is not set" in capsys.readouterr().err


def test_the_api_key_is_sent_as_a_bearer_token(monkeypatch):
    monkeypatch.setenv("LEXRL_TEST_JUDGE_KEY", "secret")
    seen = []

    def handle(request):
        seen.append(request.headers["Authorization"])
        choice = {"index": 0, "message": {"role": "assistant", "content": "[[1]]"}}
        return httpx.Response(200, json={"choices": [choice]})

    async def main():
        config = JudgeConfig("http://judge.test/v1", "m", api_key_env="LEXRL_TEST_JUDGE_KEY")
        client = JudgeClient(
            [config],
            None,
            http_client_factory=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handle)),
        )
        return await client.score(MESSAGES, parse_bracket_score)

    assert asyncio.run(main()).score == 1.0 and seen == ["Bearer secret"]
