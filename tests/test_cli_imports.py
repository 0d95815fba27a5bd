"""`lexrl eval` and `lexrl rollout` play a model without importing the training loop: the base
model and its LoRA policy come from `lexrl.train.base_model`, not `lexrl.train.trainer`."""

import json
import os
import subprocess
import sys
from pathlib import Path

# In a fresh interpreter, so that no other test's import counts: the CLI runs in-process there
# and the modules it loaded are read after it.
PLAY_THE_BASE = """
import json, sys
import lexrl.cli

for argv in json.loads(sys.argv[1]):
    try:
        lexrl.cli.main(argv)
    except SystemExit as exit_:
        assert not exit_.code, f"lexrl {argv[0]} exited {exit_.code}"
print(json.dumps({name: name in sys.modules for name in sys.argv[2:]}))
"""


def test_eval_and_rollout_of_the_base_policy_never_import_the_trainer(tmp_path, model_cache):
    config = tmp_path / "lexam.yaml"
    config.write_text(
        f"model:\n  name_or_path: tiny\n  cache_dir: {model_cache}\n"
        "rollout:\n  max_new_tokens: 4\nenv:\n  type: lexam\n"
        "grpo:\n  num_generations: 2\n"
        "eval:\n  policy: true\n  max_tasks: 1\n  samples_per_task: 1\n"
        "  degenerate_baselines: false\n"
        f"warmstart:\n  enabled: false\nrun:\n  output_dir: {tmp_path / 'run'}\n"
    )
    rollouts = tmp_path / "rollouts.jsonl"
    commands = [
        ["eval", str(config)],
        ["rollout", str(config), "--num-tasks", "1", "--out", str(rollouts)],
    ]
    modules = ["lexrl.train.trainer", "lexrl.train.base_model"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "WANDB_SILENT": "true"}
    result = subprocess.run(
        [sys.executable, "-c", PLAY_THE_BASE, json.dumps(commands), *modules],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=Path(__file__).parents[1],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("report: ") for line in lines), result.stdout[-2000:]
    assert rollouts.read_text().count("\n") == 2  # the task's group of 2
    loaded = json.loads(lines[-1])
    # The policy was loaded (from the base model's module), and the trainer never was.
    assert loaded == {"lexrl.train.trainer": False, "lexrl.train.base_model": True}
