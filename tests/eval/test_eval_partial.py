"""An evaluation stopped by SIGTERM or SIGINT keeps what it evaluated, and the same command
continues from there to the report an uninterrupted run writes; evaluation files mask API
keys."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from lexrl.eval.evaluate import (
    PARTIAL_FILE,
    EvaluationInterrupted,
    _Stopped,
    chunk_seed,
    groups_jsonl,
    resume_partial,
    stop_on_signals,
    write_groups,
)
from lexrl.types import Group, Task, Trajectory, Turn
from tests.e2e import lexrl_command, run_lexrl


def _group(task_id: str, text: str = "answer") -> Group:
    turn = Turn("planner", [1, 2], [3], [-0.5], text, adapter_version=0)
    trajectory = Trajectory(task_id, [turn], outcome={"pool": [1, 2]}, reward=0.25)
    return Group(Task(task_id, {"query": f"q {task_id}"}, [1]), [trajectory])


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
    text = groups_jsonl(saved[0], chunk=0) + groups_jsonl(saved[1][:1], chunk=1)
    partial.write_text(text + '{"chunk": 2, "task": {"id"', encoding="utf-8")
    chunks = [[group.task for group in chunk] for chunk in saved]
    done = resume_partial(partial, chunks)
    # Chunk 1 was cut short and the last line by a kill: only chunk 0 is reused, as it was.
    assert list(done) == [0]
    assert done[0] == saved[0]
    assert partial.read_text(encoding="utf-8") == groups_jsonl(saved[0], chunk=0)
    assert f"resuming: 2 of 5 tasks read from {partial}" in capsys.readouterr().out
    # A chunk of other tasks (the data changed under the same settings) is sampled again.
    chunks[0][1] = Task("b", {"query": "another question"}, [1])
    assert resume_partial(partial, chunks) == {}
    assert partial.read_text(encoding="utf-8") == ""


def test_chunks_are_seeded_each_on_its_own():
    assert chunk_seed(7, 0) == 7
    assert len({chunk_seed(7, chunk) for chunk in range(1, 50)} | {7}) == 50
    assert chunk_seed(7, 3) != chunk_seed(8, 3)


def test_a_signal_inside_stops_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(_Stopped) as stopped, stop_on_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert stopped.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert EvaluationInterrupted("x", signal.SIGTERM).exit_code == 143
    assert EvaluationInterrupted("x", signal.SIGINT).exit_code == 130


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


def _wait_for_a_line(pattern: Path, process: subprocess.Popen, timeout: float = 600) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        for partial in pattern.parent.parent.glob(f"*/{pattern.name}"):
            if partial.read_text(encoding="utf-8").count("\n") >= 1:
                return partial
        time.sleep(0.1)
    process.kill()
    _, stderr = process.communicate()
    raise AssertionError(f"no line in {pattern} before the evaluation ended:\n{stderr[-3000:]}")


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
    partial = _wait_for_a_line(tmp_path / "run" / "eval" / "*" / PARTIAL_FILE, process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143, stderr[-3000:]
    message = stderr.strip().splitlines()[-1]
    assert message.startswith("run error: SIGTERM: evaluation stopped after ")
    assert f"of 6 tasks, kept in {partial} (partial); run the same command again" in message
    done = len(partial.read_text(encoding="utf-8").splitlines())
    assert 1 <= done < 6 and f"after {done} of 6" in message

    resumed = run_lexrl("eval", str(config))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming: {done} of 6 tasks read from {partial}" in resumed.stdout
    folder, clean_folder = _written(resumed.stdout), _written(clean.stdout)
    assert folder == partial.parent and folder.name == clean_folder.name
    assert not partial.exists()
    for name in ("eval_test_report.json", "eval_test.jsonl", "eval_test_final_rankings.jsonl"):
        assert (folder / name).read_text() == (clean_folder / name).read_text(), name
    report = json.loads((folder / "eval_test_report.json").read_text())
    assert report["summary"]["episodes"] == 12
