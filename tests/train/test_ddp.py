import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).parent


def _launch(processes: int, model_dir: str, out: Path, loss: str) -> None:
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--cpu", "--num_processes", str(processes), "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        str(HERE / "ddp_update.py"), model_dir, str(out), loss,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["reinforce", "grpo"])
def test_one_and_two_processes_make_the_same_update(tiny_model_path, tmp_path, loss):
    _launch(1, tiny_model_path, tmp_path / "one.pt", loss)
    _launch(2, tiny_model_path, tmp_path / "two.pt", loss)
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert one.keys() == two.keys() and one
    for name in one:
        assert torch.allclose(one[name], two[name], atol=1e-6, rtol=1e-5), name
