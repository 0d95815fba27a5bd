import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import lexrl.models
from lexrl.config import ModelConfig, WarmstartConfig
from lexrl.train.warmstart import warmstart_dir
from tests.e2e import lexrl_command, write_config

STEPS = 3
# Fewer scripted episodes than the other end-to-end runs: the warm-start's build is what this
# test repeats, and a smaller one repeats it as well in a third of the time.
WARMSTART_EPISODES = "200"


def _start(tmp_path: Path, name: str) -> tuple[subprocess.Popen, Path]:
    """A seeded run in its own output folder and its own (empty) model cache."""
    out = tmp_path / name / "out"
    config = write_config(
        tmp_path / f"{name}.yaml", str(tmp_path / name / "cache"), out, steps=STEPS, evals=False
    )
    # One thread each: the two runs share the machine, and two threads each on 2 cores make
    # OpenMP's workers wait on each other (the step's wall time grew several-fold in CI).
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    with (tmp_path / f"{name}.log").open("w") as log:
        process = subprocess.Popen(
            lexrl_command("train", str(config), "--warmstart.num_episodes", WARMSTART_EPISODES),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return process, out


@pytest.mark.slow
def test_seeded_run_repeats_bit_for_bit(tmp_path):
    """Two runs of the same seeded config, each building its tiny model and warm-start in a fresh
    cache, end with the same adapter to the bit. They run side by side, so their timings differ;
    batches cut by the clock (`rollout.deterministic: false`) would make them diverge."""
    runs = [_start(tmp_path, name) for name in ("a", "b")]
    for (process, _), name in zip(runs, ("a", "b"), strict=True):
        assert process.wait(timeout=1800) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
    adapters, rewards = [], []
    for _, out in runs:
        adapter = out / "checkpoints" / f"step-{STEPS:06d}" / "adapter"
        adapters.append(load_file(str(adapter / "adapter_model.safetensors")))
        records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
        assert any(r["loss/grad_norm"] > 0 for r in records), "no gradient: nothing to compare"
        rewards.append([r["reward/total"] for r in records])
    assert rewards[0] == rewards[1]
    a, b = adapters
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_caches_are_keyed_by_library_versions(tmp_path, monkeypatch):
    """An upgraded torch/transformers/tokenizers builds a new tiny model and warm-start instead of
    loading what the old versions built."""
    model = ModelConfig(cache_dir=str(tmp_path))
    base = tmp_path / "tiny-base"

    def keys() -> tuple[str, str]:
        tiny = lexrl.models._tiny_key(model, ["some text"])
        return tiny, warmstart_dir(base, WarmstartConfig(), 0, [], "torch.float32").name

    before = keys()
    installed = lexrl.models.importlib.metadata.version
    monkeypatch.setattr(
        lexrl.models.importlib.metadata,
        "version",
        lambda name: "0.0.0" if name == "transformers" else installed(name),
    )
    after = keys()
    assert before[0] != after[0] and before[1] != after[1]
