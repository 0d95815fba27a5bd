"""lexrl.cache_entry: one builder per cache entry, across processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lexrl.cache_entry import build_once, entry_lock, is_built, lock_path

# A process that builds `entry` with build_once; its build leaves `built-by-child` beside the
# entry, so the test can tell whether it built or reused.
CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from lexrl.cache_entry import build_once

    entry = Path(sys.argv[1])

    def build(path):
        (path.parent / "built-by-child").write_text("")
        time.sleep(float(sys.argv[2]))
        path.mkdir()
        (path / "config.json").write_text("{}")

    build_once(entry, build)
    print("done", flush=True)
    """
)


def child(entry: Path, sleep_s: float = 0.0) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(entry), str(sleep_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def child_inside_its_build(entry: Path, sleep_s: float) -> subprocess.Popen:
    """A `child` that is holding the lock and building (its build has started)."""
    process = child(entry, sleep_s)
    while not (entry.parent / "built-by-child").exists():
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)
    return process


def write_entry(path: Path) -> None:
    path.mkdir()
    (path / "config.json").write_text("{}")


def test_a_process_waits_for_the_entry_another_builds_and_reuses_it(tmp_path):
    entry = tmp_path / "cache" / "tiny-abc"
    with entry_lock(entry):
        waiting = child(entry)
        # The child says it waits before anything else it writes to stderr.
        line = waiting.stderr.readline()
        assert f"another process is building {entry}" in line
        write_entry(entry)
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0 and out == "done\n"
    assert not (entry.parent / "built-by-child").exists()


def test_two_processes_building_at_once_build_once(tmp_path):
    entry = tmp_path / "cache" / "tiny-abc"
    first = child_inside_its_build(entry, sleep_s=5.0)
    second = child(entry)
    results = [p.communicate(timeout=60) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], results
    assert is_built(entry)
    assert "another process is building" in results[1][1]


def test_a_builder_killed_mid_build_frees_the_entry_for_the_next(tmp_path):
    entry = tmp_path / "cache" / "tiny-abc"
    killed = child_inside_its_build(entry, sleep_s=600.0)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=60)
    (entry.parent / "built-by-child").unlink()
    built = build_once(entry, write_entry)
    assert built == entry and is_built(entry)


def test_a_whole_entry_is_served_without_a_lock(tmp_path):
    entry = tmp_path / "tiny-abc"
    write_entry(entry)
    assert build_once(entry, lambda path: pytest.fail("a whole entry was rebuilt")) == entry
    assert not lock_path(entry).exists()
