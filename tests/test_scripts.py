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


def test_seed_spread_compares_the_mean_rise_with_the_spread_of_rises(tmp_path):
    runs = []
    # Two envs; the mixture's mean reward rises by 0.25 and 0.45: mean 0.35 > spread 0.2.
    for name, (a_before, a_after, b_before, b_after) in {
        "s0": (0.1, 0.5, 1.0, 1.1),
        "s1": (0.2, 0.9, 1.0, 1.2),
    }.items():
        run = tmp_path / name
        run.mkdir()
        summaries = {
            "before": {"a/reward": a_before, "b/reward": b_before, "b/accuracy": 0.5},
            "after": {"a/reward": a_after, "b/reward": b_after, "b/accuracy": 0.5},
        }
        (run / "eval_summary.json").write_text(json.dumps(summaries))
        runs.append(str(run))
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "seed_spread.py"), *runs, "--metrics", "reward", "accuracy"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in result.stdout.splitlines()}
    assert rows["mixture mean reward"].endswith("| +0.350 | 0.200 | yes |")
    assert "0.550 -> 0.800 (+0.250)" in rows["mixture mean reward"]
    assert rows["a/reward"].endswith("| +0.550 | 0.300 | yes |")
    assert rows["b/accuracy"].endswith("| +0.000 | 0.000 | no |")
    assert "a/accuracy" not in rows


def test_seed_spread_needs_the_before_and_after_evaluations(tmp_path):
    for name in ("s0", "s1"):
        (tmp_path / name).mkdir()
    (tmp_path / "s0" / "eval_summary.json").write_text(json.dumps({"after": {"a/reward": 1}}))
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "seed_spread.py"), str(tmp_path / "s0"), str(tmp_path / "s1")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        result.returncode != 0 and "s0/eval_summary.json: no 'before' evaluation" in result.stderr
    )


def _rollout_line(task: str, prompts: list[list[int]], completion: int) -> str:
    from lexrl.types import Trajectory, Turn

    turns = [
        Turn("planner", prompt, [9] * completion, [-1.0] * completion, "x", 0) for prompt in prompts
    ]
    return Trajectory(task, turns).to_json()


def test_packed_positions_counts_each_layout_of_a_rollout(tmp_path):
    """Two trajectories of one task share a 40-token first prompt; a third task's row is short.
    Rows of 8: the padded layout pads the short row to 40 + 5, the padding-free one does not,
    and the shared layouts hold the common prompt once."""
    shared = list(range(100, 140))
    lines = [
        _rollout_line("a", [shared], 5),
        _rollout_line("a", [shared], 5),
        _rollout_line("b", [[7, 8, 9]], 5),
    ]
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        [sys.executable, "scripts/packed_positions.py", str(rollouts), "--micro-batch-tokens",
         "none"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    table = {
        line.split("|")[2].strip(): line.split("|")[3].strip()
        for line in result.stdout.splitlines()
        if line.startswith("| - (8 rows)")
    }
    # Trained: 2 x 45 + 8 = 98.
    assert "3 rows, 98 trained tokens" in result.stdout
    assert table == {
        "padded": "135",  # 3 rows x (40 + 5)
        "shared": "100",  # packs [40 | 5 | 5] and [3 | 5], both at the longest, 50
        "padding_free": "98",
        "padding_free+shared": "58",  # 40 + 5 + 5, then 3 + 5
    }
