"""Checkpoint writes under a real file-size limit (RLIMIT_FSIZE), in a process of its own; started
by test_full_disk.py, alone or as two ranks (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set).

usage: python -m tests.train.limited_writes MODEL_DIR OUT_DIR FILE...
Writes checkpoint 1 unlimited, then for each FILE of it (`rng-0.pt`, `adapter/...`) tries
checkpoint 2 with the main process's file size limit one byte below that file's size in
checkpoint 1, so the write fails with EFBIG at that file, as on a disk that fills up there. The
FILE `adapters` hands the adapter to a rollout backend that loads it from files instead, limited
below the adapter's size. Prints a JSON line per FILE: the error's type, errno and message, and
what is left in the folder written to.
"""

import json
import resource
import signal
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from lexrl.config import LoraConfig, ModelConfig
from lexrl.errors import LexrlError
from lexrl.models import add_lora, load_base
from lexrl.train.checkpoint import save_checkpoint
from lexrl.train.learner import make_accelerator
from lexrl.train.manifest import ADAPTER_FILE
from lexrl.train.trainer import sync_adapter


class FileBackend:
    """A rollout backend that loads each adapter from its files, as a vLLM server does."""

    needs_adapter_files = True
    shared_by_processes = False

    def load_adapter(self, adapter_dir: Path, version: int) -> None:
        raise AssertionError(f"{adapter_dir} was loaded although its write failed")


def attempt(write: Callable[[], object], main: bool, limit: int) -> dict:
    """`write` with the file size `limit` on the main process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if main:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        write()
        return {"error": None}
    except LexrlError as error:
        return {"error": type(error).__name__, "errno": error.errno, "message": str(error)}
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def main() -> None:
    model_dir, out, files = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    # The default action of SIGXFSZ kills the process; ignored, the write fails with EFBIG.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    accelerator = make_accelerator()
    policy = add_lora(load_base(ModelConfig(), path=model_dir)[0], LoraConfig(r=4), seed=0)
    trainable = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable)
    sum(p.sum() for p in trainable).backward()
    optimizer.step()  # Adam's state, the largest file, exists after a step
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    parts = [policy, optimizer, scheduler]
    first = save_checkpoint(out, 1, *parts, {"position": 2}, accelerator)
    for name in files:
        if name == "adapters":
            folder, sized_by = out / "adapters", ADAPTER_FILE
            write = partial(sync_adapter, FileBackend(), policy, out, 2, accelerator)
        else:
            folder, sized_by = first.parent, name
            write = partial(save_checkpoint, out, 2, *parts, {"position": 4}, accelerator)
        limit = (first / sized_by).stat().st_size - 1
        result = attempt(write, accelerator.is_main_process, limit)
        left = sorted(p.name for p in folder.iterdir())
        print(json.dumps({"file": name, "left": left, **result}), flush=True)


if __name__ == "__main__":
    main()
