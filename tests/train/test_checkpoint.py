"""A disk that fills up while a checkpoint is written: the write fails loudly, the staging folder
goes, and the previous checkpoint is still the latest, complete and loadable. A checkpoint damaged
after it was written (a file truncated, lost or flipped) fails verification against its manifest:
resume falls back to the one before and says why."""

import errno
import json
import os
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from lexrl.config import LoraConfig
from lexrl.errors import CheckpointError, DamagedCheckpoint
from lexrl.models import add_lora
from lexrl.train import checkpoint as checkpoints
from lexrl.train.checkpoint import load_checkpoint, save_checkpoint
from lexrl.train.manifest import choose_checkpoint, latest_checkpoint, verify_checkpoint


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
    save_torch, write_text = checkpoints.save_torch, Path.write_text

    def check(path: Path) -> None:
        if Path(path).name == failing:
            Path(path).write_bytes(b"\0" * 16)  # what a write cut short leaves
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        written.append(Path(path))

    def save(obj, path):
        check(path)
        return save_torch(obj, path)

    def text(self, data, *args, **kwargs):
        check(self)
        return write_text(self, data, *args, **kwargs)

    monkeypatch.setattr(checkpoints, "save_torch", save)
    monkeypatch.setattr(Path, "write_text", text)
    return written


@pytest.mark.parametrize("failing", ["optimizer.pt", "trainer_state.json", "manifest.json"])
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
    assert verify_checkpoint(previous) is True

    # The previous checkpoint loads: adapter, optimizer, scheduler and state as they were saved.
    _train_a_step(policy, optimizer, scheduler)
    state = load_checkpoint(previous, policy, optimizer, scheduler, accelerator)
    assert state == {"step": 1, "position": 2}
    for name, value in policy.state_dict().items():
        if name in saved:
            assert torch.equal(value, saved[name]), name
    assert scheduler.last_epoch == 1
    assert json.loads((previous / "trainer_state.json").read_text())["step"] == 1


def _two_checkpoints(parts, tmp_path) -> tuple[Path, Path]:
    policy, optimizer, scheduler, accelerator = parts
    written = []
    for step in (1, 2):
        _train_a_step(policy, optimizer, scheduler)
        written.append(
            save_checkpoint(
                tmp_path, step, policy, optimizer, scheduler, {"position": step}, accelerator
            )
        )
    return written[0], written[1]


def _truncate(path: Path) -> tuple[int, int]:
    size = path.stat().st_size
    with path.open("r+b") as stream:
        stream.truncate(size // 2)
    return size // 2, size


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_truncated_optimizer_makes_resume_fall_back_and_say_why(parts, tmp_path):
    previous, newest = _two_checkpoints(parts, tmp_path)
    now, was = _truncate(newest / "optimizer.pt")

    choice = choose_checkpoint(tmp_path)
    assert choice.checkpoint == previous and choice.verified
    assert [damaged.checkpoint for damaged in choice.skipped] == [newest]
    assert choice.report() == [
        f"skipped {newest}: optimizer.pt is {now} bytes, the manifest says {was}"
    ]
    assert latest_checkpoint(tmp_path) == previous

    # Loaded regardless (a path given by hand), the truncated file is named, not a traceback.
    policy, optimizer, scheduler, accelerator = parts
    with pytest.raises(CheckpointError, match=r"step-000002: optimizer\.pt cannot be loaded"):
        load_checkpoint(newest, policy, optimizer, scheduler, accelerator)
    assert load_checkpoint(previous, policy, optimizer, scheduler, accelerator)["step"] == 1


def test_a_missing_adapter_makes_resume_fall_back_and_say_why(parts, tmp_path):
    previous, newest = _two_checkpoints(parts, tmp_path)
    (newest / "adapter" / "adapter_model.safetensors").unlink()

    choice = choose_checkpoint(tmp_path)
    assert choice.checkpoint == previous
    assert choice.report() == [f"skipped {newest}: adapter/adapter_model.safetensors is missing"]


def test_a_flipped_byte_of_the_same_size_fails_the_hash(parts, tmp_path):
    previous, newest = _two_checkpoints(parts, tmp_path)
    _flip_a_byte(newest / "scheduler.pt")

    with pytest.raises(DamagedCheckpoint) as raised:
        verify_checkpoint(newest)
    assert raised.value.reason == (
        "scheduler.pt has the right size but not the sha256 the manifest says: it is corrupt"
    )
    assert choose_checkpoint(tmp_path).checkpoint == previous


def test_every_checkpoint_damaged_means_none_to_resume_from(parts, tmp_path):
    previous, newest = _two_checkpoints(parts, tmp_path)
    for checkpoint in (previous, newest):
        _truncate(checkpoint / "rng-0.pt")

    choice = choose_checkpoint(tmp_path)
    assert choice.checkpoint is None
    assert [damaged.checkpoint for damaged in choice.skipped] == [newest, previous]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda c: (c / "manifest.json").write_text("{"), "manifest.json is unreadable: "),
        (lambda c: _truncate(c / "trainer_state.json"), "trainer_state.json is "),
        (lambda c: (c / "rng-0.pt").unlink(), "rng-0.pt is missing"),
        (
            lambda c: [(c / n).unlink() for n in ("manifest.json", "trainer_state.json")],
            "no manifest.json and no trainer_state.json: its write did not finish",
        ),
    ],
)
def test_a_verification_error_names_the_checkpoint_and_the_file(parts, tmp_path, damage, reason):
    _, newest = _two_checkpoints(parts, tmp_path)
    damage(newest)

    with pytest.raises(CheckpointError) as raised:
        verify_checkpoint(newest)
    assert str(raised.value).startswith(f"checkpoint {newest} is damaged: {reason}")
    assert raised.value.exit_code == 6


def test_eval_verifies_only_the_adapter(parts, tmp_path):
    """An evaluation reads only the adapter: a checkpoint whose optimizer state was deleted to
    save space still evaluates, one with a damaged adapter does not."""
    _, newest = _two_checkpoints(parts, tmp_path)
    (newest / "optimizer.pt").unlink()
    assert verify_checkpoint(newest, within="adapter") is True
    _flip_a_byte(newest / "adapter" / "adapter_model.safetensors")
    with pytest.raises(DamagedCheckpoint, match=r"adapter/adapter_model\.safetensors has the"):
        verify_checkpoint(newest, within="adapter")
    with pytest.raises(CheckpointError, match=r"checkpoint .*step-000009: no such folder"):
        verify_checkpoint(newest.parent / "step-000009")
    # The run's checkpoints/ folder given for one of them: named so, not "damaged".
    with pytest.raises(CheckpointError) as raised:
        verify_checkpoint(newest.parent, within="adapter")
    assert not isinstance(raised.value, DamagedCheckpoint)
    assert str(raised.value) == (
        f"{newest.parent} is the folder of a run's checkpoints, not one: give one of them, "
        f"e.g. {newest}"
    )


def test_a_checkpoint_from_before_manifests_is_resumed_unverified(parts, tmp_path):
    """Written by lexrl before checkpoints had a manifest: complete as the old writer defined it
    (trainer_state.json and the files resume reads), so resume takes it and says it could not
    verify it, rather than start a run that was under way over from step 0."""
    previous, newest = _two_checkpoints(parts, tmp_path)
    for checkpoint in (previous, newest):
        (checkpoint / "manifest.json").unlink()
    (newest / "scheduler.pt").unlink()

    choice = choose_checkpoint(tmp_path)
    assert choice.checkpoint == previous and not choice.verified
    assert choice.report() == [
        f"skipped {newest}: scheduler.pt is missing",
        f"{previous} has no manifest.json (written before checkpoints had one): "
        "resuming from it unverified",
    ]


def test_a_corrupt_adapter_loaded_by_hand_is_an_error_naming_it(parts, tmp_path):
    policy, *_ = parts
    _, newest = _two_checkpoints(parts, tmp_path)
    _truncate(newest / "adapter" / "adapter_model.safetensors")
    with pytest.raises(
        CheckpointError,
        match=r"step-000002: adapter/adapter_model\.safetensors cannot be loaded",
    ):
        checkpoints.load_adapter_weights(policy, newest / "adapter")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_an_unwritable_checkpoints_folder_is_an_error_naming_it(parts, tmp_path):
    policy, optimizer, scheduler, accelerator = parts
    previous = save_checkpoint(tmp_path, 1, policy, optimizer, scheduler, {}, accelerator)
    folder = tmp_path / "checkpoints"
    folder.chmod(0o500)
    try:
        with pytest.raises(CheckpointError) as raised:
            save_checkpoint(tmp_path, 2, policy, optimizer, scheduler, {}, accelerator)
    finally:
        folder.chmod(0o700)

    assert str(raised.value) == (
        f"checkpoint {folder / 'step-000002'} not written: Permission denied: "
        f"{folder / '.staging-step-000002'}; the previous checkpoint {previous} is complete: "
        "fix that, then resume from it with `--run.resume true`"
    )
    assert raised.value.errno == errno.EACCES
    assert sorted(p.name for p in folder.iterdir()) == ["step-000001"]


@pytest.mark.parametrize("failing", ["mkdir", "replace"])
def test_a_permission_error_removes_the_staging_folder(parts, tmp_path, monkeypatch, failing):
    """As the read-only folder above, for any user (root ignores the mode bits): refused when the
    staging folder is created, or when it is renamed into place after all files are written."""
    policy, optimizer, scheduler, accelerator = parts
    previous = save_checkpoint(tmp_path, 1, policy, optimizer, scheduler, {}, accelerator)
    staging = tmp_path / "checkpoints" / ".staging-step-000002"

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(staging))

    if failing == "mkdir":
        monkeypatch.setattr(Path, "mkdir", refuse)
    else:
        monkeypatch.setattr(checkpoints.os, "replace", refuse)
    with pytest.raises(CheckpointError) as raised:
        save_checkpoint(tmp_path, 2, policy, optimizer, scheduler, {}, accelerator)
    monkeypatch.undo()

    assert raised.value.errno == errno.EACCES
    assert str(raised.value).startswith(
        f"checkpoint {staging.parent / 'step-000002'} not written: Permission denied: {staging}; "
        f"the previous checkpoint {previous} is complete: fix that"
    )
    assert sorted(p.name for p in staging.parent.iterdir()) == ["step-000001"]
