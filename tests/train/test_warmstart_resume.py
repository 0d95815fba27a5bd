"""The warm-start's SFT stops at a signal after the step in progress, saves its progress beside
its cache entry, and a rerun continues it to exactly the weights of a build never stopped; its
cache entry is written staged, so a full disk leaves nothing half-written."""

import contextlib
import errno
import os
import resource
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from lexrl.config import ModelConfig, WarmstartConfig
from lexrl.models import load_base, save_staged
from lexrl.train.advantages import Row
from lexrl.train.warmstart import PROGRESS_FILE, SftProgress, SftStopped, supervised_finetune
from tests.e2e import lexrl_command, write_config

CONFIG = WarmstartConfig(enabled=True, epochs=2, batch_size=3, learning_rate=2e-3, save_every=2)


def _rows(count: int = 10) -> list[Row]:
    generator = torch.Generator().manual_seed(0)
    rows = []
    for index in range(count):
        prompt = torch.randint(5, 200, (4 + index % 3,), generator=generator).tolist()
        completion = torch.randint(5, 200, (2 + index % 4,), generator=generator).tolist()
        rows.append(Row(prompt, completion, [0.0] * len(completion), 1.0, 1.0, 0, "r"))
    return rows


class StopAt:
    """A stop request that arrives during the step `at` (counted from 1)."""

    def __init__(self, at: int) -> None:
        self.at, self.checks = at, 0

    @property
    def signal(self):
        self.checks += 1
        return signal.SIGTERM if self.checks >= self.at else None

    name = "SIGTERM"


def _model(path):
    return load_base(ModelConfig(), path=path)[0]


def test_a_stopped_sft_continued_ends_at_the_weights_of_one_never_stopped(
    tiny_model_path, tmp_path
):
    rows = _rows()  # 4 batches an epoch, 8 steps
    straight = _model(tiny_model_path)
    losses = supervised_finetune(straight, rows, CONFIG, 0, seed=0)

    progress = SftProgress(tmp_path / "entry.partial", CONFIG.save_every, StopAt(5))
    stopped = _model(tiny_model_path)
    with pytest.raises(SftStopped) as raised:
        supervised_finetune(stopped, rows, CONFIG, 0, seed=0, progress=progress)
    assert (raised.value.step, raised.value.steps) == (5, 8)  # mid-epoch: the order is saved
    assert (progress.folder / PROGRESS_FILE).is_file()
    assert not list(progress.folder.glob(".*"))  # no staged file left

    # A rerun: a fresh process loads the base again and continues from step 5.
    resumed = _model(tiny_model_path)
    progress.stop = None
    resumed_losses = supervised_finetune(resumed, rows, CONFIG, 0, seed=0, progress=progress)
    assert resumed_losses == losses
    for (name, a), (_, b) in zip(
        straight.state_dict().items(), resumed.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_progress_that_cannot_be_read_starts_over_with_a_warning(tiny_model_path, tmp_path, capsys):
    progress = SftProgress(tmp_path / "entry.partial", 2)
    progress.folder.mkdir()
    (progress.folder / PROGRESS_FILE).write_bytes(b"cut")
    assert progress.load() is None
    assert f"warning: {progress.folder / PROGRESS_FILE} cannot be read" in capsys.readouterr().out


def test_a_failed_write_of_a_cache_entry_leaves_nothing_and_names_the_entrys_file(tmp_path):
    target = tmp_path / "tiny-abc"

    def full(staging: Path) -> None:
        (staging / "config.json").write_text("{}")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(staging / "model.safetensors"))

    with pytest.raises(OSError) as raised:
        save_staged(target, full)
    assert raised.value.filename == str(target / "model.safetensors")
    assert list(tmp_path.iterdir()) == []


# A fifth of the suite's warm-start (32 SFT steps): it is built twice here, stopped and
# continued and once without a stop, and its SFT steps are most of this test's CPU.
SMALL_WARM_START = ["--warmstart.num_episodes", "60", "--warmstart.save_every", "5"]


def _uninterrupted_builds(config_path: Path, model_cache: str) -> tuple[Path, Path]:
    """The tiny model and the warm-start `lexrl train` of `config_path` (with `SMALL_WARM_START`)
    uses, as the session's model cache holds them: built there without a stop, the tiny model
    by whichever test needed it first, the warm-start by this test."""
    from lexrl.config import load_config
    from lexrl.envs import make_env
    from lexrl.models import tiny_model_dir
    from lexrl.train.base_model import resolve_base

    config = load_config(config_path, [*SMALL_WARM_START, "--model.cache_dir", model_cache])
    env = make_env(config.env)
    one_process = SimpleNamespace(main_process_first=contextlib.nullcontext)
    warm_start = Path(resolve_base(config, env, one_process))
    return tiny_model_dir(config.model, env.text_corpus()), warm_start


@pytest.mark.slow
def test_sigterm_during_the_warm_start_saves_it_exits_0_and_the_rerun_continues(
    tmp_path, model_cache
):
    """In an empty cache of its own, a `lexrl train` stopped by SIGTERM during its warm-start and
    then rerun builds the tiny model and the warm-start bit for bit as the session's cache holds
    them, built without a stop: both the continuation and the builds themselves repeat."""
    cache = tmp_path / "cache"
    config = write_config(
        tmp_path / "warm.yaml", str(cache), tmp_path / "run", steps=1, evals=False
    )
    train = lexrl_command("train", str(config), *SMALL_WARM_START)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        train,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        # Its own SIGTERM handling, not a disposition inherited from how the suite was started.
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL),
    )
    partial = None
    deadline = time.monotonic() + 600
    while partial is None and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
        partial = next(cache.glob("*.partial/progress.pt"), None)
    assert partial is not None, "the warm-start saved no progress"
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if "warm-start stopped after SFT step" in line]
    assert line.startswith("SIGTERM: ") and "run the same command to continue it" in line
    saved = torch.load(partial, weights_only=True)["step"]

    rerun = subprocess.run(train, capture_output=True, text=True, env=env, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"warm-start: continuing from step {saved} of " in rerun.stdout
    assert not list(cache.glob("*.partial"))  # removed once the entry is cached
    assert not list(cache.glob(".tmp-*"))

    for entry in _uninterrupted_builds(config, model_cache):
        built = cache / entry.name
        assert built.is_dir(), f"{entry.name} was not built in the empty cache"
        ours, theirs = (load_file(folder / "model.safetensors") for folder in (built, entry))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[name], theirs[name]) for name in ours), entry.name
        tokenizer = (built / "tokenizer.json").read_bytes()
        assert tokenizer == (entry / "tokenizer.json").read_bytes(), entry.name


def _limit_file_size() -> None:
    # Without SIG_IGN the kernel kills the process with SIGXFSZ instead of failing the write.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))


def test_a_full_disk_while_the_tiny_model_is_cached_is_one_line_and_leaves_nothing(tmp_path):
    cache = tmp_path / "cache"
    result = subprocess.run(
        lexrl_command(
            "rollout",
            "configs/demo_cpu.yaml",
            "--model.cache_dir",
            str(cache),
            "--warmstart.enabled",
            "false",
            "--num-tasks",
            "1",
            "--out",
            str(tmp_path / "rollouts.jsonl"),
        ),
        preexec_fn=_limit_file_size,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 7, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("run folder error: ") and "File too large" in last, last
    assert f"{cache}/tiny-" in last and "/model.safetensors: File too large" in last
    # No half-written entry and no .tmp-* staging folder: only the entry's empty build lock.
    (lock,) = cache.iterdir()
    assert lock.name.startswith(".tiny-") and lock.name.endswith(".lock"), lock.name
    assert lock.stat().st_size == 0
