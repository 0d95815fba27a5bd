"""`lexrl serve` on a port another process holds fails in a second, naming the port, before it
resolves or loads any model (which takes `smollm2` tens of seconds)."""

import socket
import time

from tests.e2e import run_lexrl


def test_a_port_in_use_is_refused_before_the_model_is_resolved(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        # A cache with nothing in it: reaching the model would mean building it first.
        done = run_lexrl(
            "serve", "smollm2", "--port", str(port), "--model.cache_dir", str(tmp_path),
            timeout=30,
        )  # fmt: skip
        seconds = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("config error: ")
    assert f"--port {port}: cannot listen there" in lines[0]
    # Python and `lexrl.cli` alone take seconds on a busy machine; the model takes tens.
    assert seconds < 10 and not any(tmp_path.iterdir())
