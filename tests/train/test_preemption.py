"""SIGTERM from a cluster scheduler, or Ctrl-C: `lexrl train` finishes its step, checkpoints,
exits 0, and `--run.resume true` continues with the next step (tests/train/test_resume.py: under
`accelerate launch` with 2 ZeRO-2 processes, the signal reaching every process of the job as
Slurm sends it)."""

import json
import os
import signal
import subprocess
import time

import pytest

from lexrl.train.manifest import latest_checkpoint
from tests.e2e import lexrl_command, run_lexrl, write_config

STEPS = 6


def _logged_steps(out) -> list[int]:
    path = out / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


def _wait_for_a_step(process: subprocess.Popen, out, log, after: int = 0) -> None:
    """Until a step after step `after` is logged."""
    deadline = time.time() + 900
    while len(_logged_steps(out)) <= after:
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.time() < deadline, "no step logged in 15 minutes"
        time.sleep(0.05)


def _assert_stopped_at_a_checkpointed_step(out, earlier: tuple[str, ...] = ()) -> str:
    """The steps logged so far are 1..n with n < STEPS, and the checkpoints are step n's and
    the `earlier` stops' (none periodic); step n's name."""
    stopped = _logged_steps(out)
    assert stopped == list(range(1, len(stopped) + 1))
    assert len(stopped) < STEPS, "the run ended before the signal: nothing was interrupted"
    checkpoint = latest_checkpoint(out)
    assert checkpoint is not None, "the signal wrote no checkpoint"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["step"] == stopped[-1], "the checkpoint is not the last logged step"
    assert checkpoint.name not in earlier, "no step since the last stop"
    names = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert names == sorted([*earlier, checkpoint.name])
    return checkpoint.name


def _assert_resumed_every_step_once(out) -> None:
    assert _logged_steps(out) == list(range(1, STEPS + 1)), "a step was lost or done twice"
    final = json.loads((latest_checkpoint(out) / "trainer_state.json").read_text())
    # The data position counts every step's tasks once (2 tasks per step in the tiny config).
    assert final["step"] == STEPS and final["position"] == 2 * STEPS


def _interactive() -> None:
    """Ctrl-C reaches the process as in a terminal: a test run started in the background (as CI
    may be) passes SIGINT on ignored, and a process started ignoring it keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(config, tmp_path, *overrides: str) -> tuple[subprocess.Popen, object]:
    env = {**os.environ, "WANDB_API_KEY": "", "WANDB_SILENT": "true", "HF_HUB_OFFLINE": "1"}
    log = tmp_path / "train.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            lexrl_command("train", str(config), "--run.save_every", "1000", *overrides),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_interactive,
        )
    return process, log


@pytest.mark.slow
def test_ctrl_c_then_sigterm_each_finish_the_step_checkpoint_and_the_run_resumes_every_step_once(
    tmp_path, model_cache
):
    """Ctrl-C (a terminal) stops the run after its step, with a checkpoint and exit 0; resumed,
    it is stopped the same way by SIGTERM (a cluster scheduler); resumed again, it ends with
    every step logged once. No periodic checkpoint: each one found is a signal's. W&B offline,
    so its run is resumed across both stops too."""
    out = tmp_path / "out"
    config = write_config(
        tmp_path / "run.yaml", model_cache, out, steps=STEPS, evals=False, wandb="offline"
    )
    process, log = _start(config, tmp_path)
    _wait_for_a_step(process, out, log)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=600) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert "Ctrl-C: finishing this step" in text and "stopped by SIGINT" in text
    first = _assert_stopped_at_a_checkpointed_step(out)

    done = len(_logged_steps(out))
    process, log = _start(config, tmp_path, "--run.resume", "true")
    _wait_for_a_step(process, out, log, after=done)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=600) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "resumed from" in text and "stopped by SIGTERM" in text, text[-3000:]
    _assert_stopped_at_a_checkpointed_step(out, earlier=(first,))

    result = run_lexrl("train", str(config), "--run.save_every", "1000", "--run.resume", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stderr
    _assert_resumed_every_step_once(out)


@pytest.mark.slow
def test_a_second_ctrl_c_aborts_at_once_in_one_line(tmp_path, model_cache):
    out = tmp_path / "out"
    config = write_config(tmp_path / "run.yaml", model_cache, out, steps=STEPS, evals=False)
    # Steps of a few seconds, and both presses well inside the second one: a press while the
    # run is already winding down after step 1 would find no step left to abort.
    process, log = _start(
        config, tmp_path, "--grpo.num_generations", "16", "--grpo.tasks_per_step", "8"
    )
    _wait_for_a_step(process, out, log)
    time.sleep(0.5)
    process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 130, log.read_text()[-3000:]
    text = log.read_text()
    assert "Traceback" not in text, text[-3000:]
    assert text.strip().splitlines()[-1].startswith("interrupted (Ctrl-C): aborted")


@pytest.mark.slow
def test_ctrl_c_during_the_warm_start_saves_it_and_ends_in_one_line(tmp_path, model_cache):
    out = tmp_path / "out"
    config = write_config(tmp_path / "run.yaml", model_cache, out, steps=STEPS, evals=False)
    # Warm-start on: it is what runs before the first step of a fresh cache. Its SFT stops like
    # a training step: the step in progress ends, the progress is saved, exit 0.
    process, log = _start(config, tmp_path, "--warmstart.num_episodes", "2000")
    deadline = time.time() + 300
    while "warm-start (SFT)" not in log.read_text() and time.time() < deadline:
        assert process.poll() is None, log.read_text()[-3000:]
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert "SIGINT: warm-start stopped after SFT step " in text
    assert "run the same command to continue it" in text
    assert not _logged_steps(out)
