import os
import socket
import subprocess
from pathlib import Path

import pytest
import torch

from tests.e2e import ZERO2, accelerate_command, write_config

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def _launch(processes: int, model_dir: str, out: Path, *cases: str, zero2: bool = False) -> Path:
    """`cases` (tests/train/ddp_update.py says what a case is) in one launch of `processes`;
    `zero2`: the shipped 8-GPU DeepSpeed config, on CPU processes (DeepSpeed's CPU accelerator).
    The folder with one CASE.pt each."""
    out.mkdir(parents=True, exist_ok=True)
    command = accelerate_command(
        processes, str(HERE / "ddp_update.py"), model_dir, str(out), *cases,
        config_file=ZERO2 if zero2 else None,
    )  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return out


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


# One launch per layout: one process, two DDP processes, two ZeRO-2 processes; each runs every
# case the tests below compare, and the tests share the launches (on one worker).
SHARED_LAUNCHES = pytest.mark.xdist_group("ddp_launches")
ONE_PROCESS_CASES = ("reinforce", "grpo", "grpo+repeated")
DDP_CASES = (
    "reinforce+even",
    "grpo",
    "grpo+shared",
    "grpo+tokens",
    "grpo+checkpointing+compiled",
    "grpo+padfree+checkpointing",
    "grpo+shared+padfree",
)
ZERO2_CASES = ("grpo", "grpo+shared", "grpo+checkpointing+compiled", "grpo+shared+padfree")


@pytest.fixture(scope="module")
def one_process(tiny_model_path, tmp_path_factory) -> Path:
    return _launch(1, tiny_model_path, tmp_path_factory.mktemp("one"), *ONE_PROCESS_CASES)


@pytest.fixture(scope="module")
def ddp(tiny_model_path, tmp_path_factory) -> Path:
    return _launch(2, tiny_model_path, tmp_path_factory.mktemp("ddp"), *DDP_CASES)


@pytest.fixture(scope="module")
def zero2(tiny_model_path, tmp_path_factory) -> Path:
    pytest.importorskip("deepspeed", reason="the `deepspeed` extra is not installed")
    return _launch(2, tiny_model_path, tmp_path_factory.mktemp("zero2"), *ZERO2_CASES, zero2=True)


def _record(folder: Path, case: str) -> dict:
    return torch.load(folder / f"{case}.pt")


@pytest.mark.slow
@SHARED_LAUNCHES
@pytest.mark.parametrize(
    ("reference", "case"),
    [
        # `even`: both ranks hold 4 trajectories; otherwise rank 0 runs 2 micro-batches of rows
        # and 4 of zero loss, rank 1 runs 6.
        ("reinforce", "reinforce+even"),
        ("grpo", "grpo"),
        # Trajectories 4 at a time share a 40-token prompt prefix, packed and attended by
        # Prefix Grouper's attention, against one process training the same rows repeated.
        ("grpo+repeated", "grpo+shared"),
        # Micro-batches cut by a token budget: each rank cuts its own share.
        ("grpo", "grpo+tokens"),
        # Compiled decoder layers under checkpointing: the recomputed forward is compiled too.
        ("grpo", "grpo+checkpointing+compiled"),
        # Each rank's rows end to end without padding (`grpo.padding_free`), alone or in packs.
        ("grpo", "grpo+padfree+checkpointing"),
        ("grpo+repeated", "grpo+shared+padfree"),
    ],
)
def test_two_ddp_processes_make_one_process_update(one_process, ddp, reference, case):
    one, two = _record(one_process, reference), _record(ddp, case)
    _same_update(one, two)
    assert one["grads"].keys() == two["grads"].keys() and one["grads"]
    for name, grad in one["grads"].items():
        assert grad.abs().max() > 0, name
        assert torch.allclose(grad, two["grads"][name], rtol=1e-4, atol=1e-7), name


@pytest.mark.slow
@SHARED_LAUNCHES
@pytest.mark.parametrize(
    ("reference", "case"),
    [
        ("grpo", "grpo"),
        ("grpo+repeated", "grpo+shared"),
        ("grpo", "grpo+checkpointing+compiled"),
        ("grpo+repeated", "grpo+shared+padfree"),
    ],
)
def test_deepspeed_zero2_makes_one_process_update(one_process, zero2, reference, case):
    """configs/accelerate/zero2_8gpu.yaml on 2 processes with uneven shares (2 vs 6
    micro-batches): the same gradient norm, learning rate and LoRA update as one process."""
    one, two = _record(one_process, reference), _record(zero2, case)
    assert two["deepspeed"] and not one["deepspeed"]
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
@SHARED_LAUNCHES
def test_two_machines_make_the_same_update_as_one_process(one_process, tiny_model_path, tmp_path):
    """Two `accelerate launch` commands on localhost, machine ranks 0 and 1 with one process
    each (torchrun's static rendezvous, gloo), as configs/accelerate/multinode_*.yaml start
    them on two hosts: the same update as one process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    machines = []
    for rank in (0, 1):
        command = accelerate_command(
            2, str(HERE / "ddp_update.py"), tiny_model_path, str(tmp_path), "grpo",
            machines=2, machine_rank=rank, main_process=("127.0.0.1", port),
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
    _same_update(_record(one_process, "grpo"), _record(tmp_path, "grpo"))
