"""A retrieval server that dies in the middle of a run, or answers what is no JSON: after the
openai client's retries an EndpointError names the URL, and it ends the rollout (every episode
needs retrieval; the trainer's last checkpoint is what a resumed run starts from)."""

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lexrl.envs.statute.env import StatuteEnv
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.errors import EndpointError
from lexrl.policy import ScriptedPolicy
from lexrl.retrieval.endpoints import EndpointEncoder, EndpointReranker
from lexrl.retrieval.options import RetrievalConfig
from lexrl.rollout.engine import run_groups


class RetrievalServer:
    """`/embeddings` and `/rerank` with made-up numbers (the retrieval models are not what is
    tested), or a body cut in half while `cut` is set."""

    def __init__(self):
        self.requests = 0
        self.cut = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests += 1
                if self.path.endswith("/embeddings"):
                    data = [
                        {"index": i, "embedding": [len(text) % 7 + 1.0, 1.0]}
                        for i, text in enumerate(request["input"])
                    ]
                    reply = {"data": data}
                else:
                    scores = [-float(len(d)) for d in request["documents"]]
                    reply = {
                        "results": [
                            {"index": i, "relevance_score": s} for i, s in enumerate(scores)
                        ]
                    }
                body = json.dumps(reply).encode()
                if owner.cut:
                    body = body[: len(body) // 2]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def die(self) -> None:
        """Stop answering and close the port: new connections are refused."""
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    server = RetrievalServer()
    yield server
    if server.httpd.socket.fileno() != -1:
        server.die()


@pytest.mark.parametrize("route", ["embeddings", "rerank"])
def test_a_server_gone_mid_run_is_an_error_naming_its_url_after_the_retries(server, route):
    if route == "embeddings":
        endpoint = EndpointEncoder(server.url, "m", max_retries=2)
        call = lambda: endpoint.encode(["a query"], "query")  # noqa: E731
    else:
        endpoint = EndpointReranker(server.url, "m", max_retries=2)
        call = lambda: endpoint.score("a query", ["doc one", "doc"])  # noqa: E731
    call()
    server.die()
    with pytest.raises(EndpointError) as raised:
        call()
    assert str(raised.value).startswith(
        f"{server.url}/{route}: APIConnectionError after 3 attempts"
    )


@pytest.mark.parametrize("route", ["embeddings", "rerank"])
def test_a_reply_that_is_not_json_is_an_error_naming_the_url(server, route):
    server.cut = True
    with pytest.raises(EndpointError, match=rf"^{server.url}/{route}: the reply is not JSON"):
        if route == "embeddings":
            EndpointEncoder(server.url, "m", max_retries=0).encode(["q"], "query")
        else:
            EndpointReranker(server.url, "m", max_retries=0).score("q", ["d"])


def test_a_reranker_server_gone_mid_run_ends_the_rollout_with_its_url(server, tiny_model):
    _, tokenizer = tiny_model
    config = StatuteEnvConfig(
        first_stage_k=6,
        final_k=2,
        retrieval=RetrievalConfig(
            reranker_model="m", reranker_endpoint=server.url, api_key_env="", cache_size=0
        ),
    )
    env = StatuteEnv.from_config(config)
    rng = random.Random(0)

    def play(tasks):
        return run_groups(
            env,
            tasks,
            2,
            lambda task: ScriptedPolicy(tokenizer, task.id, env.teacher(task, rng)),
            progress=False,
        )

    tasks = env.tasks("train")
    groups = play(tasks[:1])
    assert server.requests > 0 and all(not t.failed for t in groups[0].trajectories)
    server.die()
    with pytest.raises(EndpointError, match=rf"^{server.url}/rerank: APIConnectionError"):
        play(tasks[1:2])
