"""Checkpoint writes that meet a real limit: the file size limit (RLIMIT_FSIZE, with SIGXFSZ
ignored so the write fails with EFBIG as it would with ENOSPC on a full disk), set in a child
process. Whichever writer fails (torch.save, safetensors; a checkpoint or the adapter handed to
the rollout backend), the error is one CheckpointError naming the file, the staging folder goes
and the previous checkpoint stays complete; with two processes both end; and `lexrl train` ends
in one line with exit code 6."""

import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lexrl.train.manifest import latest_checkpoint, verify_checkpoint
from tests.e2e import lexrl_command

ROOT = Path(__file__).parents[2]
FILES = ["rng-0.pt", "adapter/adapter_model.safetensors", "optimizer.pt"]
"""One file of each writer, in the order a checkpoint writes them."""


def _limited_writes(model_dir: str, out: Path, *files: str, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.train.limited_writes", model_dir, str(out), *files],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )


def _results(process: subprocess.Popen) -> list[dict]:
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 0, stderr[-3000:]
    return [json.loads(line) for line in stdout.splitlines()]


def test_a_file_size_limit_at_each_writer_is_one_checkpoint_error_and_no_staging_folder(
    tiny_model_path, tmp_path
):
    results = _results(_limited_writes(tiny_model_path, tmp_path, *FILES))

    folder = tmp_path / "checkpoints"
    assert [r["file"] for r in results] == FILES
    for result in results:
        assert result["error"] == "CheckpointNotWritten" and result["errno"] == errno.EFBIG
        assert result["message"] == (
            f"checkpoint {folder / 'step-000002'} not written: File too large: "
            f"{folder / '.staging-step-000002' / result['file']}; the previous checkpoint "
            f"{folder / 'step-000001'} is complete: fix that, then resume from it with "
            "`--run.resume true`"
        )
        assert result["left"] == ["step-000001"]
    assert verify_checkpoint(folder / "step-000001") is True


def test_a_file_size_limit_when_the_adapter_is_handed_over_is_one_error_and_no_staging_folder(
    tiny_model_path, tmp_path
):
    """The adapter a vLLM backend loads from files each step is written like a checkpoint."""
    [result] = _results(_limited_writes(tiny_model_path, tmp_path, "adapters"))

    assert result["error"] == "CheckpointNotWritten" and result["errno"] == errno.EFBIG
    assert result["message"].startswith(
        f"adapter {tmp_path / 'adapters' / 'v000002'} not written: File too large: "
        f"{tmp_path / 'adapters' / '.tmp-'}"
    )
    assert result["message"].endswith(
        f"/adapter_model.safetensors; the previous checkpoint "
        f"{tmp_path / 'checkpoints' / 'step-000001'} is complete: fix that, then resume from it "
        "with `--run.resume true`"
    )
    assert result["left"] == []


@pytest.mark.slow
def test_a_failed_write_on_the_main_process_ends_the_other_process_too(tiny_model_path, tmp_path):
    """Two processes (gloo): the main one fails at its optimizer.pt, the other one, done with its
    part, must not wait for it at a barrier but end with the same error."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    ranks = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}
    processes = [
        _limited_writes(
            tiny_model_path,
            tmp_path,
            "optimizer.pt",
            env={
                **os.environ,
                **ranks,
                "MASTER_PORT": port,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "OMP_NUM_THREADS": "1",
            },
        )
        for rank in (0, 1)
    ]
    main, other = (_results(process) for process in processes)

    assert "File too large" in main[0]["message"] and "optimizer.pt" in main[0]["message"]
    assert other[0]["error"] == "CheckpointNotWritten"
    assert "another process could not write its part" in other[0]["message"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000001"]


def _file_size_limit(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


@pytest.mark.slow
def test_lexrl_train_under_a_file_size_limit_exits_6_in_one_line(finished_run):
    """The run resumed for a second step, its files limited below the size of the first
    checkpoint's optimizer.pt: the second checkpoint cannot be written."""
    config, out = finished_run
    first = out / "checkpoints" / "step-000001"
    limit = (first / "optimizer.pt").stat().st_size - 1
    environment = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    command = lexrl_command("train", str(config), "--run.resume", "true", "--run.max_steps", "2")

    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
        preexec_fn=lambda: _file_size_limit(limit),
    )

    assert result.returncode == 6, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("checkpoint error:")]
    staging = out / "checkpoints" / ".staging-step-000002"
    assert line == (
        f"checkpoint error: checkpoint {out / 'checkpoints' / 'step-000002'} not written: File "
        f"too large: {staging / 'optimizer.pt'}; the previous checkpoint {first} is complete: "
        "fix that, then resume from it with `--run.resume true`"
    )
    assert sorted(p.name for p in first.parent.iterdir()) == ["step-000001"]
    assert latest_checkpoint(out) == first
