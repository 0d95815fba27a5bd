"""A judge endpoint that misbehaves for a while, served over real HTTP on localhost: replies that
come after the client's timeout, 500s, 200s that are no completion (an HTML page, a cut JSON
body, no choices). An outage shorter than the retries costs nothing; a longer one fails the
sample with the reason (excluded from the loss: tests/train/test_loss.py), and the judge is
asked afresh once it is back."""

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lexrl.rewards.judge import JudgeClient, JudgeConfig, parse_bracket_score

MESSAGES = [{"role": "user", "content": "Grade: ... End with [[x.x]]."}]
TIMEOUT_S = 0.3
COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "judge",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}
    ],
}


class FlakyJudge:
    """Answers each request with the next fault of `script`, then with `[[0.7]]` (recovered):
    `slow` (after the client's timeout), `500`, `html`, `cut` (a JSON body cut short) or
    `no_choices`."""

    def __init__(self):
        self.script: list[str] = []
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                owner.requests += 1
                fault = owner.script.pop(0) if owner.script else "ok"
                if fault == "slow":
                    # No reply: the client has given up, and writing to its closed socket
                    # would print a BrokenPipeError into the test log.
                    time.sleep(3 * TIMEOUT_S)
                    return None
                if fault == "500":
                    # A tiny Retry-After keeps the openai client's backoff (0.5 s and up) out.
                    body = b'{"error": "overloaded"}'
                    return self._send(500, body, "application/json", **{"Retry-After-Ms": "1"})
                if fault == "html":
                    return self._send(200, b"<html>502 Bad Gateway</html>", "text/html")
                completion = json.loads(json.dumps(COMPLETION))
                completion["choices"][0]["message"]["content"] = "Fair. [[0.7]]"
                if fault == "no_choices":
                    completion["choices"] = []
                body = json.dumps(completion).encode()
                if fault == "cut":
                    body = body[: len(body) // 2]
                return self._send(200, body, "application/json")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture()
def judge():
    server = FlakyJudge()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def score(server: FlakyJudge, cache_dir=None, **overrides):
    config = JudgeConfig(server.url, "judge", timeout_s=TIMEOUT_S, **overrides)

    async def main():
        client = JudgeClient([config], cache_dir)
        try:
            return await client.score(MESSAGES, parse_bracket_score), client.stats()
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_a_timeout_then_500s_shorter_than_the_retries_costs_nothing(judge):
    judge.script = ["slow", "500", "500"]
    result, stats = score(judge, max_retries=3)
    assert result.score == 0.7 and not result.failed
    assert judge.requests == 4, "three transport retries by the openai client"
    assert stats == {"requests": 1, "cache_hits": 0, "parse_retries": 0, "failures": 0}


def test_garbage_for_a_while_is_asked_again_until_a_completion_comes(judge):
    judge.script = ["html", "cut", "no_choices"]
    result, stats = score(judge, max_parse_retries=3)
    assert result.score == 0.7 and not result.failed
    assert judge.requests == 4 and stats["requests"] == 4 and stats["failures"] == 0


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("slow", "APITimeoutError: Request timed out"),
        ("500", "InternalServerError: Error code: 500"),
        ("html", "malformed completion (AttributeError("),
        ("cut", "malformed completion (JSONDecodeError("),
        ("no_choices", "malformed completion (IndexError("),
    ],
)
def test_an_outage_longer_than_the_retries_fails_the_sample_then_the_judge_is_asked_again(
    judge, tmp_path, fault, reason
):
    judge.script = [fault] * 3
    result, stats = score(judge, tmp_path, max_retries=2, max_parse_retries=2)
    assert result.failed and result.score is None, "a failure is never a score"
    assert result.calls[0].error.startswith(f"{judge.url}: {reason}"), result.calls[0].error
    assert judge.requests == 3 and stats["failures"] == 1
    # Back up: the failure was not cached, the same sample is judged.
    again, stats = score(judge, tmp_path)
    assert again.score == 0.7 and not again.calls[0].cached and judge.requests == 4
