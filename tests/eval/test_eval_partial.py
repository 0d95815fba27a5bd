"""An evaluation stopped by SIGTERM or SIGINT at any moment keeps the chunks it evaluated, and the
same command continues from there to the report an uninterrupted run writes, under the same
settings only; a partial file cut by a kill loses its last line, not the evaluation; evaluation
files mask API keys."""

import asyncio
import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lexrl.cli import main
from lexrl.config import Config
from lexrl.errors import DatasetError, EvaluationInterrupted, PartialOfOtherSettings
from lexrl.eval import evaluate as evaluate_module
from lexrl.eval.evaluate import (
    chunk_seed,
    evaluation_dir,
    evaluation_settings,
    groups_jsonl,
    write_groups,
)
from lexrl.eval.partial import PARTIAL_FILE, SignalStop, resume_partial
from lexrl.types import Group, Task, Trajectory, Turn
from tests.chat_stub import chat_server, completion
from tests.e2e import lexrl_command, run_lexrl

SETTINGS = {"eval": {"seed": 1}, "warmstart": {"enabled": False}}


@pytest.fixture(autouse=True)
def stop_signals_at_their_defaults():
    """SIGINT and SIGTERM as an interactive process has them. A suite started as a background
    job (`pytest &`, CI runners) inherits SIGINT ignored, which `SignalStop` rightly keeps
    ignored: these tests set the disposition they rely on instead of inheriting it."""
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
        signal.SIGTERM: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    }
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _group(task_id: str, text: str = "answer") -> Group:
    turn = Turn("planner", [1, 2], [3], [-0.5], text, adapter_version=0)
    trajectory = Trajectory(task_id, [turn], outcome={"pool": [1, 2]}, reward=0.25)
    return Group(Task(task_id, {"query": f"q {task_id}"}, [1]), [trajectory])


def _header(settings: dict = SETTINGS) -> str:
    return json.dumps({"settings": settings}) + "\n"


def test_write_groups_masks_an_echoed_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-key-0123456789abcdef")
    group = _group("t1", text="the server said: bad key wandb-key-0123456789abcdef")
    write_groups([group], tmp_path / "eval_test.jsonl")
    written = (tmp_path / "eval_test.jsonl").read_text(encoding="utf-8")
    assert "wandb-key-0123456789abcdef" not in written
    assert "bad key ***" in written


def test_a_partial_file_gives_back_whole_chunks_of_the_same_tasks(tmp_path, capsys):
    partial = tmp_path / PARTIAL_FILE
    saved = [[_group("a"), _group("b")], [_group("c"), _group("d")], [_group("e")]]
    text = _header() + groups_jsonl(saved[0], chunk=0) + groups_jsonl(saved[1][:1], chunk=1)
    partial.write_text(text, encoding="utf-8")
    chunks = [[group.task for group in chunk] for chunk in saved]
    done = resume_partial(partial, chunks, SETTINGS)
    # Chunk 1 was cut short by a kill: only chunk 0 is reused, as it was.
    assert list(done) == [0]
    assert done[0] == saved[0]
    assert partial.read_text(encoding="utf-8") == _header() + groups_jsonl(saved[0], chunk=0)
    assert f"resuming: 2 of 5 tasks read from {partial}" in capsys.readouterr().out
    # A chunk of other tasks (the data changed under the same settings) is sampled again.
    chunks[0][1] = Task("b", {"query": "another question"}, [1])
    assert resume_partial(partial, chunks, SETTINGS) == {}
    assert partial.read_text(encoding="utf-8") == _header()


NON_ASCII = groups_jsonl([_group("c", "§ 823 BGB")], chunk=1).encode()
TORN = {
    "cut mid-JSON": b'{"chunk": 1, "task": {"id"',
    # Up to the first byte of `§` (0xC2 0xA7): the line does not decode.
    "cut inside a UTF-8 character": NON_ASCII[: NON_ASCII.index(b"\xc2") + 1],
    "a list": b"[1, 2]\n",
    "a string": b'"chunk"\n',
    "an object of another shape": b'{"chunk": 1}\n',
    "a chunk that is not an index": b'{"chunk": [1], "task": {}, "trajectories": []}\n',
    "trajectories that are not a list": b'{"chunk": 0, "task": {}, "trajectories": {}}\n',
}


@pytest.mark.parametrize("tail", TORN.values(), ids=TORN.keys())
def test_a_torn_last_line_is_dropped_with_a_warning_and_cut_from_the_file(tmp_path, capsys, tail):
    partial = tmp_path / PARTIAL_FILE
    good = _header() + groups_jsonl([_group("a")], chunk=0)
    partial.write_bytes(good.encode() + tail)
    done = resume_partial(partial, [[_group("a").task], [_group("c").task]], SETTINGS)
    assert list(done) == [0]
    assert partial.read_text(encoding="utf-8") == good
    assert f"warning: {partial}:3: dropped its last line" in capsys.readouterr().err


@pytest.mark.parametrize("damage", TORN.values(), ids=TORN.keys())
def test_an_unreadable_line_before_the_last_is_a_data_error_naming_it(tmp_path, damage):
    partial = tmp_path / PARTIAL_FILE
    text = _header().encode() + damage.rstrip(b"\n") + b"\n"
    partial.write_bytes(text + groups_jsonl([_group("a")], chunk=0).encode())
    with pytest.raises(DatasetError, match=f"^{partial}:2 cannot be read") as error:
        resume_partial(partial, [[_group("a").task]], SETTINGS)
    assert error.value.exit_code == 3
    assert partial.read_bytes().startswith(text)


def test_a_partial_file_of_other_settings_is_refused_naming_the_setting(tmp_path):
    partial = tmp_path / PARTIAL_FILE
    chunks = [[_group("a").task]]
    text = _header() + groups_jsonl([_group("a")], chunk=0)
    partial.write_text(text, encoding="utf-8")
    other = {**SETTINGS, "warmstart": {"enabled": True}}
    with pytest.raises(PartialOfOtherSettings) as refused:
        resume_partial(partial, chunks, other)
    assert str(refused.value).startswith(
        f"{partial} holds tasks evaluated under other settings (warmstart.enabled: False "
        "there, True now): run with its settings to continue it, or delete it"
    )
    assert refused.value.exit_code == 7
    assert partial.read_text(encoding="utf-8") == text
    partial.write_text(groups_jsonl([_group("a")], chunk=0), encoding="utf-8")
    with pytest.raises(PartialOfOtherSettings, match="it has no settings line"):
        resume_partial(partial, chunks, SETTINGS)


def test_the_folder_key_covers_the_warmstart_and_the_adapter_not_the_failed_share(tmp_path):
    def folder(config: Config, checkpoint: str | None = None) -> Path:
        return evaluation_dir(config, checkpoint, evaluation_settings(config, checkpoint))

    config = Config()
    warm = Config()
    warm.warmstart.enabled = True
    share = Config()
    share.eval.max_failed_share = 1.0
    assert folder(warm) != folder(config)
    assert folder(share) == folder(config)
    checkpoint = tmp_path / "step-000010"
    (checkpoint / "adapter").mkdir(parents=True)
    adapter = checkpoint / "adapter" / "adapter_model.safetensors"
    adapter.write_bytes(b"one adapter")
    first = folder(config, str(checkpoint))
    adapter.write_bytes(b"another adapter, written under the same path")
    assert folder(config, str(checkpoint)).name != first.name


def test_chunks_are_seeded_each_on_its_own():
    assert chunk_seed(7, 0) == 7
    assert len({chunk_seed(7, chunk) for chunk in range(1, 50)} | {7}) == 50
    assert chunk_seed(7, 3) != chunk_seed(8, 3)


def test_a_signal_cancels_the_chunk_in_progress_and_the_handlers_come_back(tmp_path, capfd):
    before = signal.getsignal(signal.SIGTERM)

    async def chunk() -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(30)
        return "done"

    started = time.monotonic()
    with SignalStop(tmp_path / PARTIAL_FILE) as stop:
        assert asyncio.run(stop.cancellable(chunk())) is None
        with pytest.raises(EvaluationInterrupted) as stopped:
            stop.check(2, 5)
    assert time.monotonic() - started < 10
    assert signal.getsignal(signal.SIGTERM) is before
    assert stopped.value.exit_code == 143
    assert str(stopped.value) == (
        f"SIGTERM: evaluation stopped after 2 of 5 tasks, kept in {tmp_path / PARTIAL_FILE} "
        "(partial); run the same command again to continue from there"
    )
    assert capfd.readouterr().err == ""
    assert EvaluationInterrupted("x", signal.SIGINT).exit_code == 130


def test_a_signal_between_chunks_keeps_the_next_one_from_starting(tmp_path, capfd):
    started = []

    async def chunk() -> str:
        started.append(True)
        return "done"

    with SignalStop(tmp_path / PARTIAL_FILE) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert asyncio.run(stop.cancellable(chunk())) is None
    assert not started and stop.signum == signal.SIGINT
    assert capfd.readouterr().err == ""


def test_a_second_signal_aborts_at_once(tmp_path):
    script = (
        "import os, signal, time\n"
        "from pathlib import Path\n"
        "from lexrl.eval.partial import SignalStop\n"
        f"with SignalStop(Path({str(tmp_path / PARTIAL_FILE)!r})):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 143
    assert result.stderr.strip() == (
        f"interrupted (SIGTERM again): aborted; the tasks done are kept in "
        f"{tmp_path / PARTIAL_FILE}: run the same command again to continue from there"
    )


class SignalAt:
    """Answers `###B###`, sending `signum` to this process on request `at`, as a scheduler may at
    any moment of the evaluation."""

    def __init__(self, at: int, signum: int = signal.SIGTERM):
        self.at, self.signum = at, signum
        self.requests = itertools.count(1)

    def __call__(self, headers) -> tuple[int, bytes]:
        if next(self.requests) == self.at:
            os.kill(os.getpid(), self.signum)
        return 200, completion("###B###")


def _eval(url: str, tmp_path: Path, output: str) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "eval",
                "configs/lexam_cpu.yaml",
                "--rollout.backend", "openai",
                "--rollout.base_url", url,
                "--rollout.chat_max_retries", "0",
                "--rollout.chat_concurrency", "2",
                # One task (4 episodes) a chunk: 6 chunks.
                "--rollout.max_concurrent_episodes", "4",
                "--rollout.chat_cache_dir", str(tmp_path / "cache"),
                "--model.name_or_path", "vendor/stub-4o",
                "--eval.max_tasks", "6",
                "--eval.degenerate_baselines", "false",
                "--run.output_dir", str(tmp_path / output),
            ]
        )  # fmt: skip
        raise SystemExit(0)
    return exit_info.value.code


def _evaluated(tmp_path: Path, output: str) -> Path:
    (folder,) = (tmp_path / output / "eval").iterdir()
    return folder


def _stopped_and_resumed(tmp_path: Path, capsys, endpoint, signum: int) -> int:
    """The tasks the stopped evaluation kept, once its rerun is checked against a clean
    evaluation."""
    with chat_server(endpoint) as url:
        code = _eval(url, tmp_path, "run")
        # The stand-in server may print its own complaint about requests cancelled mid-reply.
        stderr = capsys.readouterr().err.splitlines()
        message = next(line for line in stderr if line.startswith("run error: "))
        partial = _evaluated(tmp_path, "run") / PARTIAL_FILE
        kept = len(partial.read_text(encoding="utf-8").splitlines()) - 1
        assert code == 128 + signum, message
        name = signal.Signals(signum).name
        assert message == (
            f"run error: {name}: evaluation stopped after {kept} of 6 tasks, kept in {partial} "
            "(partial); run the same command again to continue from there"
        )
        assert _eval(url, tmp_path, "run") == 0
        assert _eval(url, tmp_path, "clean") == 0
    folder, clean = _evaluated(tmp_path, "run"), _evaluated(tmp_path, "clean")
    assert not partial.exists() and folder.name == clean.name
    assert _report(folder) == _report(clean)
    assert (folder / "eval_test.jsonl").read_text() == (clean / "eval_test.jsonl").read_text()
    return kept


def _report(folder: Path) -> dict:
    """The report in `folder`, less the one thing two runs into other output folders differ in:
    `run.output_dir`, which its provenance records (and hashes)."""
    report = json.loads((folder / "eval_test_report.json").read_text())
    del report["provenance"]["config"]["run"]["output_dir"], report["provenance"]["config_sha256"]
    return report


@pytest.mark.parametrize(
    ("at", "signum"),
    [(1, signal.SIGTERM), (4, signal.SIGTERM), (10, signal.SIGINT), (24, signal.SIGTERM)],
)
def test_a_signal_at_any_request_keeps_whole_chunks_and_a_rerun_ends_as_a_clean_run(
    tmp_path, capsys, at, signum
):
    kept = _stopped_and_resumed(tmp_path, capsys, SignalAt(at, signum), signum)
    assert kept <= (at - 1) // 4 + 1


def test_a_signal_while_a_chunk_is_appended_keeps_that_chunk(tmp_path, capsys, monkeypatch):
    signalled = []

    def append_and_be_stopped(path, text, append=False):
        if '"chunk": 2,' in text and not signalled:
            signalled.append(path)
            os.kill(os.getpid(), signal.SIGTERM)
        write_text(path, text, append=append)

    write_text = evaluate_module.write_text
    monkeypatch.setattr(evaluate_module, "write_text", append_and_be_stopped)
    assert _stopped_and_resumed(tmp_path, capsys, SignalAt(0), signal.SIGTERM) == 3


EVAL = """
model:
  name_or_path: tiny
  cache_dir: {cache}
rollout:
  max_new_tokens: 8
  # One task (2 episodes) a chunk, so the partial file grows task by task.
  max_concurrent_episodes: 2
eval:
  max_tasks: 6
  samples_per_task: 2
run:
  output_dir: {out}
"""


def _written(stdout: str) -> Path:
    line = next(line for line in stdout.splitlines() if line.startswith("report: "))
    return Path(line.removeprefix("report: ").split(" (and")[0]).parent


def _wait_for_a_task(pattern: Path, process: subprocess.Popen, timeout: float = 600) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        for partial in pattern.parent.parent.glob(f"*/{pattern.name}"):
            # The settings line, then a task.
            if partial.read_text(encoding="utf-8").count("\n") >= 2:
                return partial
        time.sleep(0.1)
    process.kill()
    _, stderr = process.communicate()
    raise AssertionError(f"no task in {pattern} before the evaluation ended:\n{stderr[-3000:]}")


SHUTDOWN_SIGNAL = """
import asyncio.runners, os, signal, sys
from lexrl.cli import main

cancel, shutdowns = asyncio.runners._cancel_all_tasks, []

def cancel_all_tasks(loop):
    shutdowns.append(loop)
    if len(shutdowns) == 2:
        if sys.argv[2] == "inside":
            loop.call_soon(os.kill, os.getpid(), signal.SIGTERM)
        else:
            os.kill(os.getpid(), signal.SIGTERM)
    cancel(loop)

asyncio.runners._cancel_all_tasks = cancel_all_tasks
main(["eval", sys.argv[1], "--eval.degenerate_baselines", "false"])
"""
"""`lexrl eval` with SIGTERM sent while `asyncio.run` shuts down the second chunk's event loop,
before (`before`) or inside (`inside`) the last turn of the loop that cancels what the chunk left
running (the backend's batching task)."""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "inside"])
def test_a_signal_while_a_chunks_event_loop_shuts_down_ends_in_one_line(
    tmp_path, model_cache, when
):
    """The race behind a flaky stop: a handler raising there left asyncio's shutdown half done,
    and what it left printed tracebacks below the one-line message at exit."""
    config = tmp_path / "eval.yaml"
    config.write_text(EVAL.format(cache=model_cache, out=tmp_path / "run"))
    environment = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", SHUTDOWN_SIGNAL, str(config), when],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )
    assert result.returncode == 143, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "Task was destroyed" not in result.stderr
    # The second chunk was whole when the signal came: it is kept.
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("run error: SIGTERM: evaluation stopped after 2 of 6 tasks, kept in ")
    )


@pytest.mark.slow
def test_sigterm_keeps_the_tasks_done_and_a_rerun_ends_as_an_uninterrupted_run(
    tmp_path, model_cache
):
    config = tmp_path / "eval.yaml"
    config.write_text(EVAL.format(cache=model_cache, out=tmp_path / "run"))
    clean = run_lexrl("eval", str(config), "--run.output_dir", str(tmp_path / "clean"))
    assert clean.returncode == 0, clean.stderr[-3000:]

    environment = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        lexrl_command("eval", str(config)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    partial = _wait_for_a_task(tmp_path / "run" / "eval" / "*" / PARTIAL_FILE, process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr[-3000:]
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("run error: SIGTERM: evaluation stopped after ")
    assert f"of 6 tasks, kept in {partial} (partial); run the same command again" in message
    done = len(partial.read_text(encoding="utf-8").splitlines()) - 1
    assert 1 <= done < 6 and f"after {done} of 6" in message

    resumed = run_lexrl("eval", str(config))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming: {done} of 6 tasks read from {partial}" in resumed.stdout
    folder, clean_folder = _written(resumed.stdout), _written(clean.stdout)
    assert folder == partial.parent and folder.name == clean_folder.name
    assert not partial.exists()
    assert _report(folder) == _report(clean_folder)
    for name in ("eval_test.jsonl", "eval_test_final_rankings.jsonl"):
        assert (folder / name).read_text() == (clean_folder / name).read_text(), name
    report = json.loads((folder / "eval_test_report.json").read_text())
    assert report["summary"]["episodes"] == 12


def _limit_file_size(limit: int):
    def limit_it() -> None:
        # Without SIG_IGN the kernel kills the process with SIGXFSZ instead of failing the write.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_it


def test_a_full_disk_mid_evaluation_names_the_file_frees_the_torn_chunk_and_resumes(tmp_path):
    """A write past a real file-size limit while a chunk is appended: one line naming the
    partial file, the file cut back to its whole chunks (the torn bytes freed), no staging file
    left, and the same command without the limit goes on to a clean evaluation's report."""
    answer = lambda headers: (200, completion("###B###"))  # noqa: E731
    with chat_server(answer) as url:
        args = [
            "eval", "configs/lexam_cpu.yaml",
            "--rollout.backend", "openai",
            "--rollout.base_url", url,
            "--rollout.max_concurrent_episodes", "4",
            "--rollout.chat_cache_dir", str(tmp_path / "cache"),
            "--model.name_or_path", "vendor/stub-4o",
            "--eval.max_tasks", "6",
            "--eval.degenerate_baselines", "false",
        ]  # fmt: skip
        full = subprocess.run(
            lexrl_command(*args, "--run.output_dir", str(tmp_path / "run")),
            preexec_fn=_limit_file_size(8_000),
            capture_output=True,
            text=True,
            timeout=600,
        )
        folder = _evaluated(tmp_path, "run")
        partial = folder / PARTIAL_FILE
        assert full.returncode == 7, full.stderr[-3000:]
        assert "Traceback" not in full.stderr
        last = full.stderr.strip().splitlines()[-1]
        assert last.startswith(f"run folder error: {partial}: File too large; free space"), last
        lines = partial.read_text(encoding="utf-8").splitlines()
        assert all(json.loads(line) for line in lines) and 1 <= len(lines) < 7
        assert partial.stat().st_size <= 8_000
        assert not [p.name for p in folder.iterdir() if ".tmp-" in p.name]

        resumed = run_lexrl(*args, "--run.output_dir", str(tmp_path / "run"))
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert run_lexrl(*args, "--run.output_dir", str(tmp_path / "clean")).returncode == 0
    assert _report(folder) == _report(_evaluated(tmp_path, "clean"))
