"""A local stand-in for an OpenAI-compatible chat endpoint (a judge), answering each request as
a test asks: a failing server, a proxy that echoes headers, ..."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(text: str) -> bytes:
    """A chat completion body whose one reply is `text`."""
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "finish_reason": "stop", "message": message}
    return json.dumps({"id": "c", "object": "chat.completion", "choices": [choice]}).encode()


@contextmanager
def chat_server(answer: Callable[[Message], tuple[int, bytes]]) -> Iterator[str]:
    """Serve `answer(request headers) -> (status, JSON body)` for every POST (the headers look
    names up in any case); yields the base URL with its `/v1`."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            status, body = answer(self.headers)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        # The default backlog of 5 resets connections when a client sends 16 at once.
        request_queue_size = 128

    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
