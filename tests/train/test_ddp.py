import os
import socket
import subprocess
from pathlib import Path

import pytest
import torch

from tests.e2e import ZERO2, accelerate_command, write_config

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def _launch(
    processes: int, model_dir: str, out: Path, loss: str, split: str = "even", prefix: str = ""
) -> None:
    # `zero2`: the shipped 8-GPU DeepSpeed config, on 2 CPU processes (DeepSpeed's CPU accelerator).
    command = accelerate_command(
        processes,
        str(HERE / "ddp_update.py"), model_dir, str(out), loss,
        "uneven" if split == "zero2" else split, *([prefix] if prefix else []),
        config_file=ZERO2 if split == "zero2" else None,
    )  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]


def _same_update(one: dict, two: dict) -> None:
    assert (one["num_processes"], two["num_processes"]) == (1, 2)
    assert two["rows_on_rank0"] < one["rows_on_rank0"], "rank 0 should hold only its share"
    # The schedule advances once per update, whatever the number of processes.
    assert two["metrics"]["loss/learning_rate"] == one["metrics"]["loss/learning_rate"] < 1e-2
    assert two["metrics"]["loss/grad_norm"] == pytest.approx(
        one["metrics"]["loss/grad_norm"], rel=1e-4
    )
    assert two["metrics"]["loss/policy"] == pytest.approx(one["metrics"]["loss/policy"], rel=1e-4)
    assert one["lora"].keys() == two["lora"].keys()
    for name, weight in one["lora"].items():
        tolerance = _first_adam_step_tolerance(one["grads"].get(name))
        assert (weight - two["lora"][name]).abs().le(tolerance).all(), name


def _first_adam_step_tolerance(grad: torch.Tensor | None) -> torch.Tensor | float:
    """How far the weights after one AdamW step (lr 1e-2, eps 1e-8, no weight decay) may differ
    when the gradient differs by the float-order noise the gradient checks allow
    (delta = 1e-4 |g| + 1e-7). The first step is lr * g / (|g| + eps), whose slope in g is
    lr * eps / (|g| + eps)^2: tiny for a clear gradient, up to a full step (2 lr between signs)
    for one at noise level, whose direction the summation order decides on each CPU."""
    lr, eps = 1e-2, 1e-8
    if grad is None:
        return 1e-6
    g = grad.abs().float()
    delta = 1e-4 * g + 1e-7
    return (lr * eps * delta / (g + eps) ** 2).clamp(max=2 * lr) + 1e-6


# The tests comparing with one process's GRPO update share its launch: on one worker.
ONE_PROCESS_GRPO = pytest.mark.xdist_group("ddp_one_process_grpo")


@pytest.fixture(scope="module")
def one_process(tiny_model_path, tmp_path_factory):
    """`one_process(loss)`: the one-process update of `loss`, launched once per module."""
    folder, updates = tmp_path_factory.mktemp("one_process"), {}

    def update(loss: str) -> dict:
        if loss not in updates:
            _launch(1, tiny_model_path, folder / f"{loss}.pt", loss)
            updates[loss] = torch.load(folder / f"{loss}.pt")
        return updates[loss]

    return update


@pytest.mark.slow
@pytest.mark.parametrize(
    ("loss", "split"),
    [("reinforce", "even"), pytest.param("grpo", "uneven", marks=ONE_PROCESS_GRPO)],
)
def test_one_and_two_processes_make_the_same_update(
    one_process, tiny_model_path, tmp_path, loss, split
):
    """`uneven`: rank 0 runs 2 micro-batches of rows and 4 of zero loss, rank 1 runs 6."""
    _launch(2, tiny_model_path, tmp_path / "two.pt", loss, split)
    one, two = one_process(loss), torch.load(tmp_path / "two.pt")
    _same_update(one, two)
    assert one["grads"].keys() == two["grads"].keys() and one["grads"]
    for name, grad in one["grads"].items():
        assert grad.abs().max() > 0, name
        assert torch.allclose(grad, two["grads"][name], rtol=1e-4, atol=1e-7), name


@pytest.mark.slow
@ONE_PROCESS_GRPO
def test_deepspeed_zero2_matches_one_process(one_process, tiny_model_path, tmp_path):
    """configs/accelerate/zero2_8gpu.yaml on 2 processes with uneven shares (2 vs 6
    micro-batches): the same gradient norm, learning rate and LoRA update as one process."""
    pytest.importorskip("deepspeed", reason="the `deepspeed` extra is not installed")
    _launch(2, tiny_model_path, tmp_path / "zero2.pt", "grpo", "zero2")
    one, two = one_process("grpo"), torch.load(tmp_path / "zero2.pt")
    assert two["deepspeed"] and not one["deepspeed"]
    _same_update(one, two)


@pytest.mark.slow
def test_shared_prefixes_over_ddp_and_zero2_make_the_repeated_update(tiny_model_path, tmp_path):
    """`grpo.shared_prefix` on 2 processes with uneven shares (DDP, then ZeRO-2 where DeepSpeed
    is installed) against one process training the same rows repeated: trajectories 4 at a time
    share a 40-token prompt prefix, packed and attended by Prefix Grouper's attention."""
    _launch(1, tiny_model_path, tmp_path / "one.pt", "grpo", "even", "repeated")
    one = torch.load(tmp_path / "one.pt")
    splits = ["uneven"]
    try:
        import deepspeed  # noqa: F401

        splits.append("zero2")
    except ImportError:
        pass
    for split in splits:
        _launch(2, tiny_model_path, tmp_path / f"{split}.pt", "grpo", split, "shared")
        two = torch.load(tmp_path / f"{split}.pt")
        assert two["deepspeed"] == (split == "zero2")
        _same_update(one, two)


@pytest.mark.slow
def test_one_task_split_over_two_processes(tmp_path, model_cache):
    """G = 1 task, K = 4 trajectories, 2 processes: each samples 2 and the advantages are taken
    over the whole group (gathered); LegalMALR's G = 2 on 8 GPUs works the same way."""
    import json

    out = tmp_path / "run"
    config = write_config(tmp_path / "c.yaml", model_cache, out, steps=2, evals=False)
    config.write_text(config.read_text().replace("tasks_per_step: 2", "tasks_per_step: 1"))
    command = accelerate_command(2, "-m", "lexrl.cli", "train", str(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_API_KEY": "", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == [1, 2]
    assert [r["count/episodes"] for r in records] == [4, 4], "K = 4 over both processes"
    assert all(r["agent/planner/turns"] >= 1 for r in records)


@pytest.mark.slow
def test_two_machines_make_the_same_update_as_one_process(tiny_model_path, tmp_path):
    """Two `accelerate launch` commands on localhost, machine ranks 0 and 1 with one process
    each (torchrun's static rendezvous, gloo), as configs/accelerate/multinode_*.yaml start
    them on two hosts: the same update as one process."""
    _launch(1, tiny_model_path, tmp_path / "one.pt", "grpo")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    machines = []
    for rank in (0, 1):
        command = accelerate_command(
            2, str(HERE / "ddp_update.py"), tiny_model_path, str(tmp_path / "two.pt"), "grpo",
            "uneven", machines=2, machine_rank=rank, main_process=("127.0.0.1", port),
        )  # fmt: skip
        machines.append(
            subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=REPO,
            )  # fmt: skip
        )
    for machine in machines:
        _, stderr = machine.communicate(timeout=600)
        assert machine.returncode == 0, stderr[-3000:]
    one, two = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    _same_update(one, two)
