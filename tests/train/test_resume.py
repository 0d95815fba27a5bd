"""Two processes under configs/accelerate/zero2_8gpu.yaml, stopped the way Slurm stops a job
step and resumed: the resumed run ends at an uninterrupted run's adapter, bit for bit."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.e2e import ZERO2, accelerate_command, write_config
from tests.train.test_preemption import (
    STEPS,
    _assert_resumed_every_step_once,
    _assert_stopped_at_a_checkpointed_step,
    _wait_for_a_step,
)

ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "WANDB_API_KEY": "",
    "WANDB_SILENT": "true",
    "HF_HUB_OFFLINE": "1",
    # torch elastic's agent SIGKILLs its workers this long after forwarding a SIGTERM (30 s by
    # default): on 2 busy cores a step and its checkpoint can take longer.
    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "600",
}


def _adapter(out: Path) -> dict[str, torch.Tensor]:
    return load_file(
        str(out / "checkpoints" / f"step-{STEPS:06d}" / "adapter" / "adapter_model.safetensors")
    )


def _zero2_train(config: Path, *overrides: str) -> list[str]:
    return accelerate_command(
        2, "-m", "lexrl.cli", "train", str(config), "--run.save_every", "1000", *overrides,
        config_file=ZERO2,
    )  # fmt: skip


@pytest.mark.slow
def test_sigterm_to_every_process_of_a_zero2_launch_checkpoints_and_resumes_to_the_same_adapter(
    tmp_path, model_cache
):
    """Slurm's `scancel` and time limit signal every process of the job: the launcher (torch
    elastic's agent, which forwards SIGTERM to its workers) and both workers. The workers agree
    to stop after the same step (an all-reduce of the flag), the checkpoint holds both ZeRO
    partitions (optimizer-0.pt, optimizer-1.pt), both exit 0, and `--run.resume true` ends at
    the adapter of an uninterrupted run with every step logged once. No periodic checkpoint:
    the only ones are the signal's and the last step's."""
    pytest.importorskip("deepspeed", reason="the `deepspeed` extra is not installed")
    straight = tmp_path / "straight"
    config = write_config(tmp_path / "a.yaml", model_cache, straight, steps=STEPS, evals=False)
    result = subprocess.run(
        _zero2_train(config), capture_output=True, text=True, env=ENV, timeout=900
    )
    assert result.returncode == 0, result.stderr[-4000:]

    out = tmp_path / "stopped"
    config = write_config(tmp_path / "b.yaml", model_cache, out, steps=STEPS, evals=False)
    log = tmp_path / "first.log"
    with log.open("w") as sink:
        # Its own process group, so the signal goes to the launcher and both workers at once.
        process = subprocess.Popen(
            _zero2_train(config), stdout=sink, stderr=subprocess.STDOUT, env=ENV,
            start_new_session=True,
        )  # fmt: skip
    _wait_for_a_step(process, out, log)
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=600)
    text = log.read_text()
    # The workers exit 0; torch elastic's agent then re-raises the signal it got as a
    # SignalException, so the launcher's own exit code is 1 (docs/faults.md).
    assert process.returncode == 1 and "SignalException" in text, text[-3000:]
    assert "stopped by SIGTERM" in text, text[-3000:]
    # torch elastic's words when a worker outlives the shutdown timeout.
    assert "forcefully exiting via" not in text, text[-3000:]
    stopped = out / "checkpoints" / _assert_stopped_at_a_checkpointed_step(out)
    assert {p.name for p in stopped.glob("optimizer*")} == {"optimizer-0.pt", "optimizer-1.pt"}

    resume = subprocess.run(
        _zero2_train(config, "--run.resume", "true"),
        capture_output=True,
        text=True,
        env=ENV,
        timeout=900,
    )
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert "resumed from" in resume.stderr
    _assert_resumed_every_step_once(out)
    records = [json.loads(line) for line in (straight / "metrics.jsonl").open()]
    resumed_after = int(stopped.name.removeprefix("step-"))
    assert any(r["loss/grad_norm"] > 0 for r in records if r["step"] > resumed_after), (
        "the steps after the stop had no gradient: nothing to compare"
    )
    a, b = _adapter(straight), _adapter(out)
    assert a.keys() == b.keys()
    # Bit for bit: the rollout batches do not depend on timing (`rollout.deterministic`), and
    # the RNG, optimizer and scheduler states come back from the checkpoint.
    for name in a:
        assert torch.equal(a[name], b[name]), name
