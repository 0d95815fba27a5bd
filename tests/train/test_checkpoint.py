"""A disk that fills up while a checkpoint is written: the write fails loudly, the staging folder
goes, and the previous checkpoint is still the latest, complete and loadable."""

import errno
import json
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from lexrl.config import LoraConfig
from lexrl.models import add_lora
from lexrl.train import checkpoint as checkpoints
from lexrl.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


@pytest.fixture()
def parts(tiny_model):
    policy = add_lora(tiny_model[0], LoraConfig(r=4, alpha=8), seed=0)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return policy, optimizer, scheduler, Accelerator(cpu=True)


def _train_a_step(policy, optimizer, scheduler) -> None:
    loss = sum(p.sum() for p in policy.parameters() if p.requires_grad)
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def _full_disk_at(monkeypatch, failing: str) -> list[Path]:
    """Make the write of the staged file named `failing` leave a partial file and raise ENOSPC;
    returns the paths written before it."""
    written: list[Path] = []
    torch_save, write_text = torch.save, Path.write_text

    def check(path: Path) -> None:
        if Path(path).name == failing:
            Path(path).write_bytes(b"\0" * 16)  # what a write cut short leaves
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        written.append(Path(path))

    def save(obj, path, *args, **kwargs):
        check(path)
        return torch_save(obj, path, *args, **kwargs)

    def text(self, data, *args, **kwargs):
        check(self)
        return write_text(self, data, *args, **kwargs)

    monkeypatch.setattr(checkpoints.torch, "save", save)
    monkeypatch.setattr(Path, "write_text", text)
    return written


@pytest.mark.parametrize("failing", ["optimizer.pt", "trainer_state.json"])
def test_a_full_disk_keeps_the_previous_checkpoint(parts, tmp_path, monkeypatch, failing):
    policy, optimizer, scheduler, accelerator = parts
    _train_a_step(policy, optimizer, scheduler)
    previous = save_checkpoint(
        tmp_path, 1, policy, optimizer, scheduler, {"position": 2}, accelerator
    )
    saved = {k: v.clone() for k, v in policy.state_dict().items() if "lora" in k}
    _train_a_step(policy, optimizer, scheduler)

    written = _full_disk_at(monkeypatch, failing)
    with pytest.raises(OSError) as raised:
        save_checkpoint(tmp_path, 2, policy, optimizer, scheduler, {"position": 4}, accelerator)
    monkeypatch.undo()
    assert written, "the disk filled up before any file of the checkpoint was written"

    message = str(raised.value)
    assert raised.value.errno == errno.ENOSPC
    assert f"checkpoint {tmp_path / 'checkpoints' / 'step-000002'} not written" in message
    assert "the disk is full" in message and f"previous checkpoint {previous}" in message
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000001"]
    assert latest_checkpoint(tmp_path) == previous

    # The previous checkpoint loads: adapter, optimizer, scheduler and state as they were saved.
    _train_a_step(policy, optimizer, scheduler)
    state = load_checkpoint(previous, policy, optimizer, scheduler, accelerator)
    assert state == {"step": 1, "position": 2}
    for name, value in policy.state_dict().items():
        if name in saved:
            assert torch.equal(value, saved[name]), name
    assert scheduler.last_epoch == 1
    assert json.loads((previous / "trainer_state.json").read_text())["step"] == 1
