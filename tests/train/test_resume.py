import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import torch
from safetensors.torch import load_file

from lexrl.train.manifest import latest_checkpoint
from tests.e2e import ZERO2, accelerate_command, write_config

STEPS = 4


def _updated_after_the_kill(out) -> bool:
    """Whether a step after the resume point moved the adapter (a zero gradient would make the
    comparison hold whatever the optimizer state)."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    return any(r["loss/grad_norm"] > 0 for r in records if r["step"] > 2)


def _adapter(out):
    return load_file(
        str(out / "checkpoints" / f"step-{STEPS:06d}" / "adapter" / "adapter_model.safetensors")
    )


def _kill_after_step_two(command: list[str], env: dict[str, str], out: Path) -> None:
    """Run `command` and SIGKILL its whole process tree (torchrun's workers leave the launcher's
    process group) once step 2's checkpoint is complete."""
    launcher = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    deadline = time.time() + 600
    while not (out / "checkpoints" / "step-000002" / "trainer_state.json").exists():
        assert launcher.poll() is None, "the run ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.02)
    tree = psutil.Process(launcher.pid)
    processes = [tree, *tree.children(recursive=True)]
    for process in processes:
        process.kill()
    psutil.wait_procs(processes, timeout=60)
    assert latest_checkpoint(out).name in ("step-000002", "step-000003"), "killed too late"


def _assert_resumed_to_the_same_adapter(
    result: subprocess.CompletedProcess, straight: Path, killed: Path
) -> None:
    assert result.returncode == 0, result.stderr[-4000:]
    assert "resumed from" in result.stderr
    assert _updated_after_the_kill(straight), "steps 3-4 had no gradient: nothing to compare"
    a, b = _adapter(straight), _adapter(killed)
    assert a.keys() == b.keys()
    # Bit for bit: the rollout batches do not depend on timing (`rollout.deterministic`), and
    # the RNG, optimizer and scheduler states come back from the checkpoint.
    for name in a:
        assert torch.equal(a[name], b[name]), name


def _zero2_train(config: Path, *overrides: str) -> list[str]:
    return accelerate_command(
        2, "-m", "lexrl.cli", "train", str(config), *overrides, config_file=ZERO2
    )


@pytest.mark.slow
def test_zero2_run_killed_mid_way_resumes_to_the_same_adapter(tmp_path, model_cache):
    """Two processes under configs/accelerate/zero2_8gpu.yaml: each checkpoint holds both ZeRO
    partitions (optimizer-0.pt, optimizer-1.pt), and a run killed after step 2 resumes to the
    adapter of an uninterrupted run."""
    pytest.importorskip("deepspeed", reason="the `deepspeed` extra is not installed")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1"}
    straight = tmp_path / "straight"
    config = write_config(tmp_path / "a.yaml", model_cache, straight, steps=STEPS, evals=False)
    result = subprocess.run(
        _zero2_train(config), capture_output=True, text=True, env=env, timeout=900
    )
    assert result.returncode == 0, result.stderr[-4000:]
    first = straight / "checkpoints" / "step-000001"
    assert {p.name for p in first.glob("optimizer*")} == {"optimizer-0.pt", "optimizer-1.pt"}

    killed = tmp_path / "killed"
    config = write_config(tmp_path / "b.yaml", model_cache, killed, steps=STEPS, evals=False)
    _kill_after_step_two(_zero2_train(config), env, killed)
    result = subprocess.run(
        _zero2_train(config, "--run.resume", "true"),
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    _assert_resumed_to_the_same_adapter(result, straight, killed)
    steps = (killed / "metrics.jsonl").read_text().splitlines()
    assert len(steps) == STEPS, "metrics of redone steps must not be duplicated"
