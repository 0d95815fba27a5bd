"""An evaluation holds its folder while it runs: a second one into it (the same settings, the
same `run.output_dir`) is refused at once in one line naming the holder, and leaves the first's
files as they were."""

import os
import socket

import pytest

from lexrl.cli import main
from lexrl.run_lock import LOCK_NAME, hold_run_folder
from tests.chat_stub import chat_server, completion


def _eval(url: str, tmp_path) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "eval",
                "configs/lexam_cpu.yaml",
                "--rollout.backend", "openai",
                "--rollout.base_url", url,
                "--rollout.chat_max_retries", "0",
                "--rollout.chat_cache_dir", str(tmp_path / "cache"),
                "--model.name_or_path", "vendor/stub-4o",
                "--eval.max_tasks", "2",
                "--eval.degenerate_baselines", "false",
                "--run.output_dir", str(tmp_path / "run"),
            ]
        )  # fmt: skip
        raise SystemExit(0)
    return exit_info.value.code


@pytest.mark.slow
def test_a_second_evaluation_into_a_held_folder_is_refused_at_once(tmp_path, capsys):
    with chat_server(lambda headers: (200, completion("###B###"))) as url:
        assert _eval(url, tmp_path) == 0
        (folder,) = (tmp_path / "run" / "eval").iterdir()
        assert not (folder / LOCK_NAME).exists()
        written = {path.name: path.read_bytes() for path in folder.iterdir()}
        capsys.readouterr()

        # What a first evaluation still running holds (an flock conflicts within one process
        # too, so holding it here stands for another process).
        with hold_run_folder(folder):
            assert _eval(url, tmp_path) == 7
        said = capsys.readouterr().err.strip().splitlines()
        assert len(said) == 1 and said[0].startswith(f"run folder error: {folder} is in use")
        assert f"{socket.gethostname()} PID {os.getpid()}, started " in said[0]
        assert {path.name: path.read_bytes() for path in folder.iterdir()} == written

        # Released, the folder is the evaluation's again.
        assert _eval(url, tmp_path) == 0
