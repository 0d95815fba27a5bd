"""The HTTP clients against a local server in the OpenAI / vLLM formats, backed by the tiny
sentence-transformers models (the real vLLM server is exercised in the vLLM tests)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from lexrl.errors import EndpointError
from lexrl.retrieval.dense import SentenceTransformerEncoder
from lexrl.retrieval.endpoints import EndpointEncoder, EndpointReranker
from lexrl.retrieval.rerank import CrossEncoderReranker
from lexrl.retrieval.tiny import tiny_retrieval_model

DOCUMENTS = ["the lessor shall refund the deposit", "overtime pay", "child support"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    encoder = SentenceTransformerEncoder(
        str(tiny_retrieval_model("embedder", DOCUMENTS, folder)), device="cpu"
    )
    reranker = CrossEncoderReranker(
        str(tiny_retrieval_model("reranker", DOCUMENTS, folder)), device="cpu"
    )
    state = {"fail_next": 0, "requests": 0, "headers": None}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _reply(self, status, body, headers=None):
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            state["requests"] += 1
            state["headers"] = {name.lower(): value for name, value in self.headers.items()}
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if state["fail_next"] > 0:
                state["fail_next"] -= 1
                # A tiny Retry-After keeps the openai client's backoff (0.5 s and up) out.
                return self._reply(503, {"error": "loading"}, {"Retry-After-Ms": "1"})
            if request.get("model") != "tiny":
                return self._reply(404, {"error": f"model {request.get('model')} not served"})
            if self.path == "/v1/embeddings":
                vectors = encoder.encode(request["input"], "document")
                data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
                return self._reply(200, {"data": data[::-1]})
            if self.path == "/v1/rerank":
                scores = reranker.score(request["query"], request["documents"])
                results = [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]
                return self._reply(
                    200, {"results": sorted(results, key=lambda r: -r["relevance_score"])}
                )
            return self._reply(404, {"error": "no such route"})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield {
        "url": f"http://127.0.0.1:{httpd.server_address[1]}/v1",
        "state": state,
        "encoder": encoder,
        "reranker": reranker,
    }
    httpd.shutdown()


def test_endpoint_encoder_matches_the_local_model(server, monkeypatch):
    monkeypatch.setenv("TEST_KEY", "secret")
    remote = EndpointEncoder(server["url"], "tiny", batch_size=2, api_key_env="TEST_KEY")
    vectors = remote.encode(DOCUMENTS, "document")
    np.testing.assert_allclose(vectors, server["encoder"].encode(DOCUMENTS, "document"), atol=1e-5)
    assert server["state"]["headers"]["authorization"] == "Bearer secret"


def test_endpoint_reranker_puts_scores_back_in_document_order(server):
    remote = EndpointReranker(server["url"], "tiny")
    expected = server["reranker"].score("deposit", DOCUMENTS)
    np.testing.assert_allclose(remote.score("deposit", DOCUMENTS), expected, rtol=1e-5)


@pytest.mark.parametrize("route", ["embeddings", "rerank"])
def test_the_openai_client_retries_a_503_then_succeeds(server, route):
    server["state"]["fail_next"] = 2
    before = server["state"]["requests"]
    if route == "rerank":
        assert (
            len(EndpointReranker(server["url"], "tiny", max_retries=2).score("q", DOCUMENTS)) == 3
        )
    else:
        assert EndpointEncoder(server["url"], "tiny", max_retries=2).encode(["q"], "query").shape[0]
    assert server["state"]["requests"] - before == 3


def test_the_retries_run_out_into_an_endpoint_error(server):
    server["state"]["fail_next"] = 2
    with pytest.raises(EndpointError, match=r"/v1/rerank: HTTP 503: .*loading"):
        EndpointReranker(server["url"], "tiny", max_retries=1).score("q", DOCUMENTS)
    assert server["state"]["fail_next"] == 0


def test_without_a_key_the_openai_client_sends_empty(server, monkeypatch):
    monkeypatch.delenv("TEST_KEY", raising=False)
    EndpointReranker(server["url"], "tiny", api_key_env="TEST_KEY").score("q", DOCUMENTS)
    assert server["state"]["headers"]["authorization"] == "Bearer EMPTY"


def test_endpoint_errors_name_the_url_and_the_reply(server):
    with pytest.raises(EndpointError, match=r"/v1/embeddings: HTTP 404: .*model other not served"):
        EndpointEncoder(server["url"], "other").encode(["q"], "query")
    with pytest.raises(EndpointError, match="/v1/rerank: APIConnectionError after 1 attempts"):
        EndpointReranker("http://127.0.0.1:9/v1", "tiny", max_retries=0).score("q", ["d"])
