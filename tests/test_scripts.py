import json
import subprocess
import sys
from pathlib import Path

import torch

SCRIPTS = Path(__file__).parents[1] / "scripts"


def test_random_qwen3_4b_has_the_4b_architecture():
    sys.path.insert(0, str(SCRIPTS))
    from build_random_model import QWEN3_4B
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**QWEN3_4B))
    assert 4.0e9 < sum(p.numel() for p in model.parameters()) < 4.05e9


def test_shrunk_random_model_loads_as_a_policy(tmp_path):
    from lexrl.config import ModelConfig
    from lexrl.models import load_base

    out = tmp_path / "model"
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "build_random_model.py"), "--out", str(out),
         "--layers", "1", "--hidden", "128", "--intermediate", "256", "--heads", "2",
         "--kv-heads", "1", "--vocab", "6000", "--dtype", "float32"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["parameters"] > 0
    model, tokenizer = load_base(ModelConfig(), path=out)
    ids = torch.tensor([tokenizer("security deposit")["input_ids"]])
    assert model(ids).logits.shape == (1, ids.shape[1], 6000)
