"""A finished `lexrl train` run, built once per session for the tests that start a second run, a
resume or a full disk in its folder (each on a copy of it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e import run_lexrl

ONE_STEP = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 8
grpo:
  num_generations: 2
  tasks_per_step: 1
warmstart:
  enabled: false
logging:
  wandb_mode: disabled
  samples_every: 1
run:
  output_dir: {out}
  max_steps: 1
  eval_before: false
  eval_after: false
"""


def write_one_step(config: Path, cache: str, out: Path) -> Path:
    config.write_text(ONE_STEP.format(cache=cache, out=out))
    return config


@pytest.fixture(scope="session")
def finished_folder(tmp_path_factory, model_cache) -> Path:
    """The folder of a finished one-step run on the tiny model (no warm-start, no evaluation): a
    checkpoint, its metrics and samples."""
    root = tmp_path_factory.mktemp("finished")
    config = write_one_step(root / "run.yaml", model_cache, root / "run")
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


@pytest.fixture()
def finished_run(finished_folder, tmp_path, model_cache) -> tuple[Path, Path]:
    """A copy of `finished_folder` for one test, and the config that trains into it."""
    out = tmp_path / "run"
    shutil.copytree(finished_folder, out)
    return write_one_step(tmp_path / "run.yaml", model_cache, out), out
