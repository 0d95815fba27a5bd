"""The `vllm-server` backend when a server goes down and comes back, against a stand-in for
vLLM's routes (no vLLM needed): requests wait for it (or go to the live replicas), the adapter
sampled from is loaded onto the restarted server before they are re-sent, and a server that stays
down past `restart_wait_s` is an error naming its URL. test_vllm_server.py does it for real."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lexrl.errors import EndpointError
from lexrl.generation import Sampling
from lexrl.rollout.vllm_server import VLLMServerBackend

SAMPLING = Sampling(temperature=1.0, max_new_tokens=2)


class StubServer:
    """vLLM's `/health`, `/v1/completions` and LoRA routes with made-up tokens, answering 404 for
    a model it does not hold as vLLM does. `die` closes the port; `start` opens it again as a
    restarted server holding no adapter. `calls` lists (route, model or adapter name)."""

    def __init__(self):
        self.port = 0
        self.calls: list[tuple[str, str]] = []
        self.adapters: dict[str, str] = {}
        self.start()

    def start(self) -> None:
        owner = self
        self.adapters = {}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._reply(200, {}) if self.path == "/health" else self._reply(404, {})

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                route = self.path.removeprefix("/v1")
                name = request.get("lora_name") or request.get("model")
                owner.calls.append((route, name))
                if route == "/load_lora_adapter":
                    if name in owner.adapters:
                        message = f"The lora adapter '{name}' has already been loaded."
                        return self._reply(400, {"error": {"message": message}})
                    owner.adapters[name] = request["lora_path"]
                    return self._reply(200, {})
                if route == "/unload_lora_adapter":
                    owner.adapters.pop(name, None)
                    return self._reply(200, {})
                if name != "base" and name not in owner.adapters:
                    message = f"The model `{name}` does not exist."
                    return self._reply(404, {"error": {"message": message}})
                logprobs = {"tokens": ["token_id:5", "token_id:6"], "token_logprobs": [-0.5, -1.0]}
                self._reply(200, {"choices": [{"logprobs": logprobs}]})

            def _reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def die(self) -> None:
        """Stop answering and close the port: new connections are refused, as after SIGKILL."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self.calls.clear()

    def restart_in(self, seconds: float) -> threading.Timer:
        timer = threading.Timer(seconds, self.start)
        timer.start()
        return timer


@pytest.fixture()
def servers():
    started: list[StubServer] = []
    yield lambda: started.append(StubServer()) or started[-1]
    for server in started:
        if server.httpd.socket.fileno() != -1:
            server.die()


def _backend(urls: list[str], wait_s: float) -> VLLMServerBackend:
    # One client retry keeps the tests short; the waiting under test comes after the retries.
    return VLLMServerBackend(urls, max_retries=1, restart_wait_s=wait_s)


def _sample(backend: VLLMServerBackend, count: int):
    async def run():
        return await asyncio.gather(*(backend.generate([1, 2, 3], SAMPLING) for _ in range(count)))

    return asyncio.run(run())


def _adapter(tmp_path, version: int):
    folder = tmp_path / f"v{version:06d}"
    folder.mkdir()
    return folder


def test_requests_wait_for_a_restarted_server_that_gets_the_current_adapter_first(
    servers, tmp_path, capsys
):
    server = servers()
    backend = _backend([server.url], wait_s=30)
    backend.load_adapter(_adapter(tmp_path, 3), version=3)
    server.die()
    server.restart_in(1.5)

    completions = _sample(backend, 8)

    assert [c.adapter_version for c in completions] == [3] * 8
    assert [c.completion_ids for c in completions] == [[5, 6]] * 8
    # One thread re-loads the adapter, before any request is re-sent to the restarted server.
    assert server.calls[0] == ("/load_lora_adapter", "lexrl-v3")
    assert server.adapters == {"lexrl-v3": str((tmp_path / "v000003").resolve())}
    assert server.calls[1:] == [("/completions", "lexrl-v3")] * 8
    err = capsys.readouterr().err
    assert f"waiting up to 30 s for {server.url} to come back" in err
    assert f"{server.url}: back after" in err
    assert "re-loaded adapter lexrl-v3" in err
    backend.close()


def test_a_server_not_back_in_time_is_an_error_naming_its_url_and_the_wait(servers, tmp_path):
    server = servers()
    backend = _backend([server.url], wait_s=1)
    backend.load_adapter(_adapter(tmp_path, 1), version=1)
    server.die()
    started = time.monotonic()
    with pytest.raises(EndpointError) as error:
        _sample(backend, 3)
    message = str(error.value)
    assert f"{server.url}: not back after" in message
    assert "rollout.vllm_restart_wait_s = 1" in message
    assert "APIConnectionError after 2 attempts" in message
    assert 1 <= time.monotonic() - started < 20
    backend.close()


def test_no_wait_fails_at_once_as_before(servers, capsys):
    server = servers()
    backend = _backend([server.url], wait_s=0)
    server.die()
    with pytest.raises(EndpointError, match=f"{server.url}/v1/completions: APIConnectionError"):
        backend.complete([1, 2, 3], SAMPLING)
    assert "waiting" not in capsys.readouterr().err
    backend.close()


def test_requests_go_to_the_live_replica_while_the_other_is_down(servers, tmp_path):
    live, down = servers(), servers()
    backend = _backend([live.url, down.url], wait_s=60)
    backend.load_adapter(_adapter(tmp_path, 2), version=2)
    down.die()

    # Nothing waits for the dead replica: every request is answered while it is down.
    completions = _sample(backend, 12)
    assert [c.adapter_version for c in completions] == [2] * 12
    assert down.calls == []

    down.start()
    deadline = time.monotonic() + 20
    while ("/load_lora_adapter", "lexrl-v2") not in down.calls and time.monotonic() < deadline:
        time.sleep(0.1)
    assert down.calls == [("/load_lora_adapter", "lexrl-v2")]
    sent_before = backend.requests_sent[1]
    _sample(backend, 8)
    assert backend.requests_sent[1] > sent_before, "the replica back is used again"
    assert ("/completions", "lexrl-v2") in down.calls
    backend.close()


@pytest.mark.parametrize("loaded_by", ["this process", "another process sharing the server"])
def test_a_server_restarted_between_requests_gets_the_adapter_again(servers, tmp_path, loaded_by):
    """No request sees it down; the first one after is answered 404 for the adapter."""
    server = servers()
    backend = _backend([server.url], wait_s=30)
    folder = _adapter(tmp_path, 5)
    if loaded_by == "this process":
        backend.load_adapter(folder, version=5)
    else:
        _backend([server.url], wait_s=30).load_adapter(folder, version=5)
        backend.use_adapter(5, folder)
    server.die()
    server.start()

    completion = backend.complete([1, 2, 3], SAMPLING)

    assert completion.adapter_version == 5
    assert server.calls == [
        ("/completions", "lexrl-v5"),
        ("/load_lora_adapter", "lexrl-v5"),
        ("/completions", "lexrl-v5"),
    ]
    backend.close()


def test_an_adapter_loaded_while_the_server_is_down_is_loaded_once_it_is_back(servers, tmp_path):
    server = servers()
    backend = _backend([server.url], wait_s=30)
    backend.load_adapter(_adapter(tmp_path, 1), version=1)
    server.die()
    backend.load_adapter(_adapter(tmp_path, 2), version=2)
    assert backend.adapter_version == 2
    server.restart_in(1.0)

    assert backend.complete([1, 2, 3], SAMPLING).adapter_version == 2
    assert server.calls == [("/load_lora_adapter", "lexrl-v2"), ("/completions", "lexrl-v2")]
    backend.close()
