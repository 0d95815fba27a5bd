import os
import signal
import subprocess
import time

import pytest
from safetensors.torch import load_file

from tests.e2e import lexrl_command, run_lexrl, write_config

STEPS = 4


def _adapter(out):
    return load_file(
        str(out / "checkpoints" / f"step-{STEPS:06d}" / "adapter" / "adapter_model.safetensors")
    )


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_adapter(tmp_path, model_cache):
    straight = tmp_path / "straight"
    config = write_config(tmp_path / "a.yaml", model_cache, straight, steps=STEPS, evals=False)
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-3000:]

    killed = tmp_path / "killed"
    config = write_config(tmp_path / "b.yaml", model_cache, killed, steps=STEPS, evals=False)
    process = subprocess.Popen(
        lexrl_command("train", str(config)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "WANDB_MODE": "offline"},
    )
    checkpoints = killed / "checkpoints"
    deadline = time.time() + 600
    while not (checkpoints / "step-000002" / "trainer_state.json").exists():
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (checkpoints / f"step-{STEPS:06d}").exists(), "killed too late to test resuming"

    result = run_lexrl("train", str(config), "--run.resume", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stderr
    a, b = _adapter(straight), _adapter(killed)
    assert a.keys() == b.keys()
    for name in a:
        assert (a[name] == b[name]).all(), name
    steps = [line for line in (killed / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == STEPS, "metrics of redone steps must not be duplicated"
