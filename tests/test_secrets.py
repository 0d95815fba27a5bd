"""API keys come only from environment variables and never reach a file, the console or a log:
a short training on the tiny model whose judge server fails (one failure echoes the request's
Authorization header into its error body) and then succeeds, every output file scanned."""

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.cli import main
from lexrl.config import ConfigError, load_config
from lexrl.errors import EndpointError
from lexrl.retrieval.endpoints import EndpointReranker
from lexrl.secrets import MASK, is_loopback, redact, resolve_api_key, scrub

KEY = "sk-lexrl-canary-5f3a9c1e7b2d4680"
WANDB_KEY = "0123456789abcdef0123456789abcdef0123beef"
KEY_ENV = "LEXRL_TEST_SECRET_KEY"

no_mask = st.text(min_size=1).filter(lambda s: "*" not in s)


@given(st.text(), st.lists(no_mask, min_size=1, max_size=3), st.text())
def test_redact_leaves_no_secret_in_any_text(text, secrets, tail):
    leaky = text + secrets[0] + tail + "".join(secrets)
    redacted = redact(leaky, secrets)
    assert not any(secret in redacted for secret in secrets)
    assert MASK in redacted


@given(st.text(), no_mask)
def test_redact_keeps_a_text_without_secrets(text, secret):
    if secret not in text:
        assert redact(text, [secret, ""]) == text


def test_scrub_masks_every_key_read_and_the_wandb_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("WANDB_API_KEY", WANDB_KEY)
    assert resolve_api_key(KEY_ENV, "judge") == KEY
    assert scrub(f"401: Bearer {KEY}, wandb {WANDB_KEY}") == "401: Bearer ***, wandb ***"


@pytest.mark.parametrize("bad", [KEY + "\n", KEY + " ", "sk-\u00e9t\u00e9", "sk\x07x"])
def test_a_key_no_http_header_can_carry_is_refused_without_echoing_it(monkeypatch, bad):
    monkeypatch.setenv(KEY_ENV, bad)
    with pytest.raises(ConfigError, match=f"{KEY_ENV} .* set it to the key alone") as error:
        resolve_api_key(KEY_ENV, "judge")
    assert bad.strip() not in str(error.value)


def test_an_unset_key_names_the_way_to_skip_it_for_a_local_server(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match='set that `api_key_env` to "" for a server without'):
        resolve_api_key(KEY_ENV, "judge")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://localhost:8000/v1",
        "http://[::1]:8000/v1",
        "http://127.0.1.1/v1",
        "HTTP://LOCALHOST:8000",
    ],
)
def test_an_unset_key_for_a_server_on_this_machine_is_a_note_not_an_error(monkeypatch, capsys, url):
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert resolve_api_key(KEY_ENV, "policy", base_url=url, flag="--rollout.api_key_env") == "EMPTY"
    (note,) = capsys.readouterr().err.splitlines()
    assert note.startswith(f"note: {KEY_ENV} (--rollout.api_key_env) is not set; ")
    assert note.endswith("is on this machine, so no key is sent")


@pytest.mark.parametrize(
    "url",
    ["https://api.openai.com/v1", "http://10.0.0.5:8000/v1", "http://localhost.example.com/v1"],
)
def test_an_unset_key_elsewhere_names_the_flag_that_skips_it(monkeypatch, url):
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert not is_loopback(url)
    expected = (
        f"policy: environment variable {KEY_ENV} (api_key_env) is not set; set it, or pass "
        '`--rollout.api_key_env ""` for a server without authentication'
    )
    with pytest.raises(ConfigError) as error:
        resolve_api_key(KEY_ENV, "policy", base_url=url, flag="--rollout.api_key_env")
    assert str(error.value) == expected


def test_a_set_key_is_sent_to_a_server_on_this_machine_too(monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, KEY)
    assert resolve_api_key(KEY_ENV, "policy", base_url="http://127.0.0.1:8000/v1") == KEY
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("yaml", "field"),
    [
        (
            "env:\n  type: lexam\n  judges:\n    - base_url: http://judge.test/v1\n"
            f"      model: m\n    - base_url: https://user:{KEY}@api.test/v1\n      model: m\n",
            "`env.judges[1].base_url` carries credentials",
        ),
        (
            "env:\n  type: debate\n  rubric_judges:\n    - base_url: http://judge.test/v1\n"
            f"      model: m\n      api_key_env: {KEY}\n",
            "`env.rubric_judges[0].api_key_env` must be the NAME",
        ),
        (
            f"env:\n  type: statute\n  retrieval:\n    dense_endpoint: http://h/v1?api_key={KEY}\n",
            "`env.retrieval.dense_endpoint` has a credential in its query",
        ),
        (
            f"env:\n  type: statute\n  eval:\n    final_reranker:\n      api_key_env: {KEY}\n",
            "`env.eval.final_reranker.api_key_env` must be the NAME",
        ),
        (
            "env:\n  type: mix\n  members:\n    - env: {type: gdpr}\n    - env:\n"
            "        type: lexam\n        judges:\n          - base_url: http://judge.test/v1\n"
            f"            model: m\n            api_key_env: {KEY}\n",
            "`env.members[1].env.judges[0].api_key_env` must be the NAME",
        ),
        (f"rollout:\n  vllm_urls: ['http://:{KEY}@h:8000']\n", "`rollout.vllm_urls[0]` carries"),
    ],
)
def test_a_config_carrying_a_key_is_refused_naming_the_field(tmp_path, yaml, field):
    path = tmp_path / "config.yaml"
    path.write_text(yaml)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).startswith(field) and KEY not in str(error.value)


@pytest.fixture()
def judge_server():
    """An OpenAI-compatible server whose first request gets a 500 that echoes the request's
    Authorization header, the second a connection closed without a reply, the rest a score;
    `/rerank` always fails with the echo."""
    state = {"requests": 0, "authorization": set()}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            authorization = self.headers["Authorization"]
            with lock:
                state["authorization"].add(authorization)
                number = state["requests"] = state["requests"] + 1
            if self.path.endswith("/rerank") or number == 1:
                # OpenAI's error shape: the client puts its `message` into the exception's.
                error = {"message": f"rejected credentials {authorization}", "type": "auth"}
                return self._reply(500, {"error": error})
            if number == 2:
                self.close_connection = True
                return None
            message = {"role": "assistant", "content": "Fine. [[0.6]]"}
            choice = {"index": 0, "finish_reason": "stop", "message": message}
            return self._reply(200, {"id": "c", "object": "chat.completion", "choices": [choice]})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield {"url": f"http://127.0.0.1:{httpd.server_address[1]}/v1", "state": state}
    httpd.shutdown()


def test_an_endpoint_error_echoing_the_key_is_masked(judge_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    reranker = EndpointReranker(judge_server["url"], "tiny", api_key_env=KEY_ENV, max_retries=0)
    with pytest.raises(EndpointError) as error:
        reranker.score("q", ["a document"])
    assert judge_server["state"]["authorization"] == {f"Bearer {KEY}"}
    assert "rejected credentials Bearer ***" in str(error.value) and KEY not in str(error.value)


RUN = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 8
grpo:
  num_generations: 2
  tasks_per_step: 1
env:
  type: lexam
  config: open_question
  judge_cache_dir: {out}/judge_cache
  judges:
    - base_url: {url}
      model: judge
      api_key_env: {key_env}
      max_retries: 0
      max_parse_retries: 0
eval:
  max_tasks: 3
logging:
  wandb_mode: offline
  samples_every: 1
run:
  output_dir: {out}
  max_steps: 1
  save_every: 1
"""


@pytest.mark.slow
def test_no_key_in_any_output_of_a_run_whose_judge_fails_then_succeeds(
    judge_server, tmp_path, model_cache, monkeypatch, capfd, caplog, recwarn
):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("WANDB_API_KEY", WANDB_KEY)
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(
        RUN.format(cache=model_cache, out=out, url=judge_server["url"], key_env=KEY_ENV)
    )

    main(["train", str(config)])

    # The key was in play: every request carried it.
    assert judge_server["state"]["authorization"] == {f"Bearer {KEY}"}
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # The scan covers what a run writes: nothing is vacuously clean.
    names = set(files)
    assert {"config.yaml", "metrics.jsonl", "samples.jsonl", "eval_before.jsonl"} <= names
    assert {"eval_after.jsonl", "eval_before_env.json", "eval_before_env.md"} <= names
    wandb = [name for name in names if name.startswith("wandb/")]
    assert any(name.endswith(".wandb") for name in wandb), wandb
    assert any(name.endswith("debug-internal.log") for name in wandb), wandb
    assert any(name.startswith("judge_cache/") for name in names), "no judgment succeeded"
    assert KEY_ENV.encode() in files["config.yaml"]
    before = files["eval_before.jsonl"].decode()
    # Both failures are stored, the echoed header masked; the other episodes were judged.
    assert "InternalServerError" in before and f"rejected credentials Bearer {MASK}" in before
    assert "APIConnectionError" in before and '"score": 0.6' in before
    metrics = json.loads(files["metrics.jsonl"])
    assert metrics["judge/failed"] == 0 and metrics["reward/total"] == pytest.approx(0.6)

    captured = capfd.readouterr()
    streams = {
        "stdout": captured.out,
        "stderr": captured.err,
        "logging": caplog.text,
        "warnings": "\n".join(str(warning.message) for warning in recwarn),
    }
    assert "step 1:" in streams["stderr"] and caplog.records, "the console and the log are empty"
    for secret in (KEY, WANDB_KEY):
        assert [name for name, data in files.items() if secret.encode() in data] == []
        assert [name for name, text in streams.items() if secret in text] == []
