"""The `openai` rollout backend against a local stand-in for a paid chat API: `lexrl eval` writes
the usual report for the served model, a failing endpoint costs counted episodes and no crash,
replies are cached, the key reaches no file, and `lexrl train` refuses the backend."""

import json
import os
import threading
from pathlib import Path

import pytest

from lexrl.cli import main
from lexrl.rollout.openai_chat import request_timeout
from tests.chat_stub import chat_server, completion

KEY = "sk-lexrl-policy-canary-5c0ffee1d2"
KEY_ENV = "LEXRL_TEST_POLICY_KEY"


class Endpoint:
    """Answers `###B###` quoting the Authorization header (a proxy echoing it), and every
    `fail_every`-th request with a 500."""

    def __init__(self, fail_every: int = 0):
        self.fail_every = fail_every
        self.requests = 0
        self.lock = threading.Lock()

    def __call__(self, headers) -> tuple[int, bytes]:
        with self.lock:
            self.requests += 1
            number = self.requests
        if self.fail_every and number % self.fail_every == 0:
            return 500, json.dumps(
                {"error": {"message": f"down for {headers['Authorization']}"}}
            ).encode()
        return 200, completion(f"(seen {headers['Authorization']}) ###B###")


def evaluate(url: str, tmp_path: Path, *extra: str) -> dict:
    main(
        [
            "eval",
            "configs/lexam_cpu.yaml",
            "--rollout.backend", "openai",
            "--rollout.base_url", url,
            "--rollout.api_key_env", KEY_ENV,
            "--rollout.chat_max_retries", "0",
            "--rollout.chat_cache_dir", str(tmp_path / "cache"),
            "--model.name_or_path", "vendor/stub-4o",
            "--eval.max_tasks", "6",
            "--run.output_dir", str(tmp_path / "run"),
            *extra,
        ]
    )  # fmt: skip
    (folder,) = (tmp_path / "run" / "eval").iterdir()
    return json.loads((folder / "eval_test_report.json").read_text())


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def test_a_served_model_is_evaluated_into_the_usual_report_with_its_name(tmp_path):
    endpoint = Endpoint()
    with chat_server(endpoint) as url:
        report = evaluate(url, tmp_path)
    assert report["system"] == "vendor/stub-4o" and report["env_name"] == "lexam"
    (folder,) = (tmp_path / "run" / "eval").iterdir()
    assert folder.name.startswith("stub-4o_test_first6_")
    summary = report["summary"]
    assert summary["episodes"] == 24 and "failed_episodes" not in summary
    assert endpoint.requests == 24
    assert summary["parsed"] == 1.0
    golds = [row["task"]["gold"] for row in _jsonl(tmp_path)]
    assert summary["accuracy"] == pytest.approx(sum(g == 1 for g in golds) / len(golds))
    assert {row["policy"] for row in report["degenerate_baselines"]} >= {"teacher", "always_B"}


def test_a_failing_endpoint_costs_counted_episodes_not_the_evaluation(tmp_path):
    with chat_server(Endpoint(fail_every=3)) as url:
        report = evaluate(url, tmp_path)
    summary = report["summary"]
    assert summary["episodes"] == 24 and summary["failed_episodes"] == 8
    failures = [
        trajectory["failed"]
        for line in _jsonl(tmp_path)
        for trajectory in line["trajectories"]
        if trajectory["failed"]
    ]
    assert len(failures) == 8
    assert all(reason.startswith(f"policy {url}: InternalServerError") for reason in failures)


def test_replies_are_cached_so_a_second_evaluation_sends_nothing(tmp_path):
    endpoint = Endpoint()
    with chat_server(endpoint) as url:
        first = evaluate(url, tmp_path)
        for folder in (tmp_path / "run" / "eval").iterdir():
            for file in folder.iterdir():
                file.unlink()
            folder.rmdir()
        second = evaluate(url, tmp_path)
    assert endpoint.requests == 24
    assert first["summary"] == second["summary"]


def test_the_key_reaches_no_file_even_when_the_endpoint_echoes_it(tmp_path):
    with chat_server(Endpoint(fail_every=2)) as url:
        evaluate(url, tmp_path)
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any("cache" in path.parts for path in files)
    leaked = [path for path in files if KEY.encode() in path.read_bytes()]
    assert not leaked
    assert os.environ[KEY_ENV] == KEY


def test_train_refuses_the_backend_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "train",
                "configs/lexam_cpu.yaml",
                "--rollout.backend", "openai",
                "--rollout.base_url", "http://127.0.0.1:9/v1",
                "--run.output_dir", str(tmp_path / "run"),
            ]
        )  # fmt: skip
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("config error: `rollout.backend: openai` is for evaluation")
    assert not (tmp_path / "run").exists()


def test_a_paper_config_runs_against_a_local_server_without_its_key(tmp_path, monkeypatch, capsys):
    """`configs/api/*` name OpenAI's key; pointed at a server on this machine, with only
    `--rollout.base_url` and `--model.name_or_path` changed, they run without it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with chat_server(Endpoint()) as url:
        main(
            [
                "eval",
                "configs/api/lexam_mcq_gpt4o.yaml",
                "--rollout.base_url", url.removesuffix("/v1"),  # the bare address will do
                "--model.name_or_path", "smollm2-135m",
                "--env.source", "sample",
                "--eval.max_tasks", "2",
                "--rollout.chat_cache_dir", "",
                "--run.output_dir", str(tmp_path / "run"),
            ]
        )  # fmt: skip
    err = capsys.readouterr().err
    assert "note: OPENAI_API_KEY (--rollout.api_key_env) is not set" in err
    (folder,) = (tmp_path / "run" / "eval").iterdir()
    report = json.loads((folder / "eval_test_report.json").read_text())
    assert report["summary"]["parsed"] == 1.0 and "failed_episodes" not in report["summary"]


@pytest.mark.parametrize(
    ("cap", "expected"), [(96, 120.0), (240, 120.0), (1000, 500.0), (2000, 1000.0)]
)
def test_the_timeout_grows_with_the_completion_cap(cap, expected):
    assert request_timeout(120.0, cap) == expected
    assert request_timeout(1500.0, cap) == 1500.0  # the configured timeout stays the floor


def _jsonl(tmp_path: Path) -> list[dict]:
    (folder,) = (tmp_path / "run" / "eval").iterdir()
    return [json.loads(line) for line in (folder / "eval_test.jsonl").read_text().splitlines()]
