"""Faults of the warm-start: a signal while its teacher plays ends in one line naming what was
stopped and how to continue, exiting as the signal would; its Ctrl-C lines point at the same
command, not at `--run.resume`; a build clears the progress of warm-starts nobody continues."""

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
from filelock import FileLock

from lexrl.cache_entry import lock_path
from lexrl.errors import WarmstartInterrupted
from lexrl.train.warmstart import PROGRESS_FILE, remove_abandoned_progress, scripted_rows
from lexrl.types import Task, Trajectory

DAY = 24 * 3600


@pytest.fixture(autouse=True)
def stop_signals_at_their_defaults():
    """SIGINT and SIGTERM as an interactive process has them (a suite run as a background job
    inherits SIGINT ignored, which the warm-start rightly keeps ignored)."""
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
        signal.SIGTERM: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    }
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


class SignalledEnv:
    """A teacher's env whose `at`th episode gets `signum` and then waits for a reply that would
    take half a minute (as an endpoint judge may)."""

    name = "signalled"

    def __init__(self, at: int, signum: int) -> None:
        self.at, self.signum, self.played = at, signum, 0

    def warmstart_tasks(self) -> list[Task]:
        return [Task("t", {}, None)]

    def teacher(self, task, rng):
        return None

    async def run_episode(self, task, policy) -> Trajectory:
        self.played += 1
        if self.played == self.at:
            os.kill(os.getpid(), self.signum)
            await asyncio.sleep(30)
        return Trajectory(task.id)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_teacher_replay_ends_it_in_one_line(signum):
    env = SignalledEnv(at=3, signum=signum)
    started = time.monotonic()
    with pytest.raises(WarmstartInterrupted) as stopped:
        scripted_rows(env, None, 10, seed=0)
    assert time.monotonic() - started < 10 and env.played == 3
    name = signal.Signals(signum).name
    assert str(stopped.value) == (
        f"{name}: warm-start interrupted while its scripted teacher played its episodes (2 of "
        "10 played; they are played again in full, any SFT progress saved earlier is kept); "
        "run the same command again to continue"
    )
    assert stopped.value.exit_code == 128 + signum and stopped.value.kind == "run"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_cli_prints_the_interrupted_replay_as_a_run_error_exiting_143(monkeypatch, capsys):
    from lexrl import cli

    def replay(config, args):
        scripted_rows(SignalledEnv(at=1, signum=signal.SIGTERM), None, 4, seed=0)

    # The replay in place of the evaluation: what `lexrl eval` of the tiny base runs first.
    monkeypatch.setitem(cli._WITH_CONFIG, "eval", replay)
    with pytest.raises(SystemExit) as exited:
        cli.main(["eval", "configs/lexam_cpu.yaml"])
    assert exited.value.code == 143
    # Beside the progress bar (which a terminal draws over), the one line of the error.
    said = [line for line in capsys.readouterr().err.splitlines() if "teacher episodes" not in line]
    assert [line for line in said if line.strip()] == [said[-1]]
    assert said[-1].startswith("run error: SIGTERM: warm-start interrupted")


CTRL_C_TWICE = """
import os, signal, sys, time
from pathlib import Path
from lexrl.train.warmstart import sft_stop_request
signal.signal(signal.SIGINT, signal.default_int_handler)
stop = sft_stop_request(Path(sys.argv[1]))
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.1)
assert stop.signal == signal.SIGINT
os.kill(os.getpid(), signal.SIGINT)
time.sleep(5)
"""


@pytest.mark.slow
def test_ctrl_c_during_the_sft_points_at_the_same_command_not_at_resume(tmp_path):
    folder = tmp_path / "tiny-warm-abc.partial"
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_TWICE, str(folder)], capture_output=True, text=True
    )
    assert done.returncode == 130, done.stderr
    first, second = [line for line in done.stderr.splitlines() if line]
    assert first.startswith("Ctrl-C: finishing this SFT step and saving the warm-start's progress")
    assert second == (
        "interrupted (Ctrl-C): warm-start aborted; run the same command again to continue it "
        f"from the progress last saved in {folder}"
    )
    assert "--run.resume" not in done.stderr


def _progress(cache, name: str, age_s: float):
    folder = cache / f"{name}.partial"
    folder.mkdir(parents=True)
    (folder / PROGRESS_FILE).write_bytes(b"saved")
    then = time.time() - age_s
    for path in (folder / PROGRESS_FILE, folder):
        os.utime(path, (then, then))
    return folder


def test_a_build_removes_only_progress_nobody_continues(tmp_path, capsys):
    cache = tmp_path / "cache"
    target = cache / "tiny-1-warm-new"
    own = _progress(cache, target.name, 3 * DAY)
    abandoned = _progress(cache, "tiny-0-warm-old", 2 * DAY)
    recent = _progress(cache, "tiny-1-warm-recent", DAY - 600)
    building = _progress(cache, "tiny-1-warm-busy", 2 * DAY)
    other = cache / "tiny-1"
    other.mkdir()

    with FileLock(lock_path(cache / "tiny-1-warm-busy")):
        remove_abandoned_progress(target)
    assert not abandoned.exists()
    assert own.is_dir() and recent.is_dir() and building.is_dir() and other.is_dir()
    said = capsys.readouterr().out.splitlines()
    assert said == [
        f"warm-start: removed {abandoned}, another warm-start's progress untouched for a day"
    ]
