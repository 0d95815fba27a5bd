"""An evaluation that cannot score says so: when every episode of an env failed, or more than
`eval.max_failed_share` of them, `lexrl eval` writes its report and then ends with a run error
(exit 9) naming the most common reasons; the report shows the failed count beside every mean."""

import io
import json
import math
import socket
import threading
from pathlib import Path

import pytest
from rich.console import Console

from lexrl.cli import main
from lexrl.errors import EvaluationFailed
from lexrl.eval.evaluate import check_failures, markdown_summary, print_summary, summarize
from lexrl.eval.partial import PARTIAL_FILE
from lexrl.types import Group, Task, Trajectory
from tests.chat_stub import chat_server, completion


def closed_port() -> int:
    """A localhost port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_eval(url: str, tmp_path: Path, *extra: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "eval",
                "configs/lexam_cpu.yaml",
                "--rollout.backend", "openai",
                "--rollout.base_url", url,
                "--rollout.chat_max_retries", "0",
                "--rollout.chat_cache_dir", str(tmp_path / "cache"),
                "--model.name_or_path", "vendor/stub-4o",
                "--eval.max_tasks", "6",
                "--run.output_dir", str(tmp_path / "run"),
                *extra,
            ]
        )  # fmt: skip
        raise SystemExit(0)
    return exit_info.value.code


def folder(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "run" / "eval").iterdir()
    return found


def test_a_dead_endpoint_writes_the_report_then_ends_with_a_run_error_naming_it(tmp_path, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert run_eval(url, tmp_path) == 9
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(
        "run error: 24 of 24 episodes failed (eval.max_failed_share: 0.5), most often: "
        f"24 x policy {url}: APIConnectionError: Connection error."
    )
    written = folder(tmp_path)
    assert f"the report {written / 'eval_test_report.md'} counts them" in error
    report = json.loads((written / "eval_test_report.json").read_text())
    assert report["summary"] == {"episodes": 24.0, "failed_episodes": 24.0}
    reason = f"policy {url}: APIConnectionError: Connection error."
    assert report["failure_reasons"] == [{"reason": reason, "count": 24}]
    markdown = (written / "eval_test_report.md").read_text()
    assert "| metric | mean [95% CI] | failed |" in markdown
    assert "| episodes | 24.0000 | 24/24 |" in markdown
    assert f"## Failed episodes\n\n| episodes | reason |\n|---:|---|\n| 24 | {reason} |" in markdown
    assert not (written / PARTIAL_FILE).exists()


def test_a_paper_baseline_config_pointed_at_a_dead_local_server_prints_its_reasons(
    tmp_path, capsys, monkeypatch
):
    # Only the endpoint and the model changed: the config's OpenAI key is not needed locally.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "eval",
                "configs/api/argument_rma_gpt4o.yaml",
                "--rollout.base_url", url,
                "--model.name_or_path", "smollm2-135m",
                "--rollout.chat_max_retries", "0",
                "--rollout.chat_cache_dir", str(tmp_path / "cache"),
                "--env.test_per_kind", "1",
                "--run.output_dir", str(tmp_path / "run"),
            ]
        )  # fmt: skip
    assert exit_info.value.code == 9
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY (--rollout.api_key_env) is not set" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(
        f"run error: 3 of 3 episodes failed (eval.max_failed_share: 0.5), most often: "
        f"3 x policy {url}/v1: APIConnectionError: Connection error."
    )


class EveryThird:
    """Answers `###B###`, but 429 to `failing` requests of every three."""

    def __init__(self, failing: int):
        self.failing = failing
        self.requests = 0
        self.lock = threading.Lock()

    def __call__(self, headers) -> tuple[int, bytes]:
        with self.lock:
            self.requests += 1
            number = self.requests
        if number % 3 < self.failing:
            return 429, json.dumps({"error": {"message": "rate limited"}}).encode()
        return 200, completion("###B###")


def test_more_than_the_share_failing_is_a_run_error_and_the_share_can_be_raised(tmp_path, capsys):
    endpoint = EveryThird(failing=2)
    with chat_server(endpoint) as url:
        assert run_eval(url, tmp_path) == 9
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert error.startswith("run error: 16 of 24 episodes failed")
        assert f"16 x policy {url}: RateLimitError: Error code: 429" in error
        # The share decides only how the evaluation ends: the rerun uses the same folder and
        # the 8 cached replies, and asks again only for the 16 failed calls.
        endpoint.failing = 3
        assert run_eval(url, tmp_path, "--eval.max_failed_share", "0.7") == 0
        assert endpoint.requests == 24 + 16
    report = json.loads((folder(tmp_path) / "eval_test_report.json").read_text())
    assert report["summary"]["episodes"] == 24 and report["summary"]["failed_episodes"] == 16


def test_a_few_failures_still_give_a_report_with_the_failed_count_beside_each_mean(
    tmp_path, capsys
):
    with chat_server(EveryThird(failing=1)) as url:
        assert run_eval(url, tmp_path) == 0
    markdown = (folder(tmp_path) / "eval_test_report.md").read_text()
    assert "| failed |" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| reward |")]
    assert len(rows) == 1 and rows[0].endswith(" | 8/24 |")
    reason = f"policy {url}: RateLimitError: Error code: 429"
    report = json.loads((folder(tmp_path) / "eval_test_report.json").read_text())
    ((listed, count),) = [(r["reason"], r["count"]) for r in report["failure_reasons"]]
    assert listed.startswith(reason) and count == 8
    assert f"| 8 | {reason}" in markdown
    # Below eval.max_failed_share the evaluation succeeds, and stderr says so in one line.
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warning.startswith(
        "warning: 8 of 24 episodes failed and are left out of the means "
        f"(eval.max_failed_share: 0.5), most often: 8 x {reason}"
    )
    assert warning.endswith(
        f"the report {folder(tmp_path) / 'eval_test_report.md'} lists every reason"
    )


def _groups(failed: list[str | None]) -> list[Group]:
    task = Task("t", {}, None)
    return [Group(task, [Trajectory("t", reward=1.0, failed=reason) for reason in failed])]


class OneEnv:
    name = "lexam"


def test_the_message_counts_the_most_common_reasons_and_the_others(capsys):
    reasons = ["a  down", "a down", "a down", "b", "c", "d", None]
    with pytest.raises(EvaluationFailed) as failed:
        check_failures(OneEnv(), [], _groups(reasons), 0.5, Path("report.md"))
    message = str(failed.value)
    # Whitespace is folded, so one reason written two ways counts once.
    assert message.startswith("6 of 7 episodes failed (eval.max_failed_share: 0.5), most ")
    assert "most often: 3 x a down; 1 x b; 1 x c (and 1 more);" in message
    assert failed.value.exit_code == 9
    assert capsys.readouterr().err == ""
    check_failures(OneEnv(), [], _groups(reasons), 0.9, Path("report.md"))
    assert capsys.readouterr().err == (
        "warning: 6 of 7 episodes failed and are left out of the means (eval.max_failed_share: "
        "0.9), most often: 3 x a down; 1 x b; 1 x c (and 1 more); the report report.md lists "
        "every reason\n"
    )
    with pytest.raises(EvaluationFailed):
        check_failures(OneEnv(), [], _groups(["x", "x"]), 1.0, Path("report.md"))


def test_a_summary_shows_the_failed_count_beside_every_mean_and_n_a_for_none():
    failed, scored = summarize(_groups(["x", "x"])), summarize(_groups([None, "x"]))
    assert markdown_summary(scored, {}).splitlines() == [
        "| metric | mean [95% CI] | failed |",
        "|---|---|---|",
        "| episodes | 2.0000 | 1/2 |",
        "| failed_episodes | 1.0000 | 1/2 |",
        "| reward | 1.0000 | 1/2 |",
    ]
    out = io.StringIO()
    print_summary({"before": failed, "after": scored}, Console(file=out, width=200))
    row = next(line for line in out.getvalue().splitlines() if "reward" in line)
    assert [cell.strip() for cell in row.split("│")[2:6]] == ["n/a", "2/2", "1.0000", "1/2"]


def test_an_env_whose_reward_is_nan_fails_every_episode_and_the_evaluation(
    tmp_path, capsys, monkeypatch
):
    """A NaN reward is no score: every episode counts as failed, the line says why once, and
    the evaluation ends with a run error instead of exit 0 with the reward `n/a`."""
    monkeypatch.setattr(
        "lexrl.envs.lexam.env.mcq_reward", lambda *args: {"correct": math.nan, "format": 1.0}
    )
    monkeypatch.setattr("lexrl.policy._REPORTED", set())
    with chat_server(lambda headers: (200, completion("###B###"))) as url:
        assert run_eval(url, tmp_path) == 9
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line.startswith("env error:")]
    assert len(said) == 1 and "reward component 'correct' is nan" in said[0]
    assert err.strip().splitlines()[-1].startswith("run error: 24 of 24 episodes failed")
    report = json.loads((folder(tmp_path) / "eval_test_report.json").read_text())
    assert report["summary"]["failed_episodes"] == 24
