"""A writer that lexrl does not wrap itself (here `lexrl rollout`'s JSONL), failing under a real
file-size limit: the command ends in one `run folder error` line (exit 7), never a traceback.
The checkpoint writers have their own message (tests/train/test_full_disk.py)."""

import resource
import signal

from tests.e2e import lexrl_command


def _limit_file_size() -> None:
    # Without SIG_IGN the kernel kills the process with SIGXFSZ instead of failing the write.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))


def test_a_write_past_the_file_size_limit_ends_in_one_line(tiny_model_path, tmp_path):
    import subprocess

    out = tmp_path / "rollouts.jsonl"
    result = subprocess.run(
        lexrl_command(
            "rollout",
            "configs/demo_cpu.yaml",
            "--model.name_or_path",
            tiny_model_path,
            "--warmstart.enabled",
            "false",
            "--num-tasks",
            "1",
            "--out",
            str(out),
        ),
        preexec_fn=_limit_file_size,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 7, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run folder error: ") and "File too large" in last, last
    assert f"{out}: File too large" in last
    assert out.stat().st_size <= 300


def test_an_unwritable_datasets_cache_is_named_with_the_variable_that_moves_it(tmp_path):
    """`datasets` caches each table it reads under HF_HOME; a cache it cannot create (here under
    /sys, which no process may write) is the machine's, not the dataset's: not a `data error`."""
    import os
    import subprocess

    cache = "/sys/lexrl-datasets-cache"
    env = {**os.environ, "HF_DATASETS_CACHE": cache, "HF_HOME": str(tmp_path)}
    result = subprocess.run(
        lexrl_command("envs", "lexam", "--stats"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 7, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run folder error: the `datasets` cache cannot be written"), last
    assert cache in last and "HF_DATASETS_CACHE" in last, last
    assert "Traceback" not in result.stderr


WRITE_PAST_THE_LIMIT = """
import resource, signal, sys
from lexrl.secrets import write_text
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
try:
    write_text(sys.argv[1], "x" * 1200, append=sys.argv[2] == "append")
except OSError as error:
    print(error.filename, error.strerror)
"""


def test_a_write_past_the_limit_frees_what_it_wrote_and_names_the_file(tmp_path):
    """An append is cut back to the file's earlier length (no torn record); a rewrite leaves the
    earlier version whole and no staging file."""
    import subprocess
    import sys

    for mode in ("append", "replace"):
        path = tmp_path / f"{mode}.jsonl"
        path.write_text("y" * 500)
        result = subprocess.run(
            [sys.executable, "-c", WRITE_PAST_THE_LIMIT, str(path), mode],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.stdout.strip() == f"{path} File too large", result.stderr
        assert path.read_text() == "y" * 500, mode
        assert sorted(p.name for p in tmp_path.iterdir() if mode in p.name) == [path.name]
