"""The reaper kills the processes a block started once the process that ran the block dies by
SIGKILL, and leaves alone the processes started outside the block and any process that has
taken a dead one's pid."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from lexrl.rollout.reaper import stop

TRAINER = """
import json, subprocess, sys, time
from lexrl.rollout.reaper import reap_on_death
sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
before = subprocess.Popen(sleeper)
with reap_on_death():
    inside = subprocess.Popen(sleeper)
    time.sleep(0.5)
print(json.dumps({"before": before.pid, "inside": inside.pid}), flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until(condition, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process model")
def test_a_trainer_killed_with_sigkill_leaves_no_process_its_block_started():
    trainer = subprocess.Popen(
        [sys.executable, "-c", TRAINER], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    pids = json.loads(trainer.stdout.readline())
    try:
        assert not gone(pids["inside"]) and not gone(pids["before"])
        time.sleep(1.5)  # a watcher poll: still alive while the trainer lives
        assert not gone(pids["inside"])
        trainer.send_signal(signal.SIGKILL)
        trainer.wait()
        assert wait_until(lambda: gone(pids["inside"])), "the block's process outlived the trainer"
        assert not gone(pids["before"]), "a process started before the block was killed"
    finally:
        for pid in pids.values():
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_reused_pid_is_not_stopped_and_a_process_that_ignores_sigterm_is_killed():
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    sleeper = subprocess.Popen([sys.executable, "-c", stubborn])
    try:
        time.sleep(1.0)  # past the interpreter's start, so the SIGTERM handler is in place
        start = psutil.Process(sleeper.pid).create_time()
        assert stop([(sleeper.pid, start - 1.0)], grace_s=0.1) == 0
        assert sleeper.poll() is None
        assert stop([(sleeper.pid, start)], grace_s=0.5) == 1
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
