import json
import os
import subprocess
import sys
import textwrap

import pytest

from lexrl.errors import RunFolderLocked
from lexrl.run_lock import LOCK_NAME, hold_run_folder


def test_a_second_holder_is_refused_with_the_first_ones_host_and_pid(tmp_path):
    with hold_run_folder(tmp_path):
        holder = json.loads((tmp_path / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
        # Another process, as a second `lexrl train` would be.
        code = textwrap.dedent(
            f"""
            from lexrl.run_lock import hold_run_folder
            with hold_run_folder({str(tmp_path)!r}):
                pass
            """
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert result.returncode != 0
        assert "RunFolderLocked" in result.stderr
        assert f"PID {os.getpid()}" in result.stderr and str(tmp_path) in result.stderr
    assert not (tmp_path / LOCK_NAME).exists()


def test_the_same_process_cannot_hold_a_folder_twice(tmp_path):
    with (
        hold_run_folder(tmp_path),
        pytest.raises(RunFolderLocked, match="in use by another run"),
        hold_run_folder(tmp_path),
    ):
        pass


def test_a_lock_left_by_a_killed_run_is_taken_over_with_a_warning(tmp_path):
    code = textwrap.dedent(
        f"""
        import os, signal
        from lexrl.run_lock import hold_run_folder
        with hold_run_folder({str(tmp_path)!r}):
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert killed.returncode == -9
    dead_pid = json.loads((tmp_path / LOCK_NAME).read_text())["pid"]
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from lexrl.run_lock import hold_run_folder\n"
            f"with hold_run_folder({str(tmp_path)!r}):\n    print('held')",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and "held" in result.stdout
    assert "taking over the lock of a run that is gone" in result.stderr
    assert f"PID {dead_pid}" in result.stderr


def test_a_folder_the_run_created_and_left_empty_is_removed(tmp_path):
    folder = tmp_path / "run"
    with hold_run_folder(folder):
        assert folder.is_dir()
    assert not folder.exists()
    with hold_run_folder(folder):
        (folder / "metrics.jsonl").write_text("")
    assert (folder / "metrics.jsonl").exists() and not (folder / LOCK_NAME).exists()
