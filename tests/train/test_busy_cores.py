"""The warning for a CPU run started on cores that other work keeps busy."""

import os

import torch

from lexrl.train.busy_cores import busy_cores_warning, warn_if_cores_busy


def test_busy_cores_get_a_warning_naming_the_threads_to_use():
    message = busy_cores_warning(load=2.1, cores=2, threads=2, threads_set=False)
    assert message is not None and "load 2.1 on 2 cores" in message
    assert "OMP_NUM_THREADS=1" in message
    # On 16 cores with 12.5 busy, the run's share is the 3 left.
    assert "OMP_NUM_THREADS=3" in busy_cores_warning(12.5, 16, 16, False)


def test_no_warning_when_the_user_chose_the_threads_or_the_cores_are_free():
    assert busy_cores_warning(2.1, 2, 2, threads_set=True) is None
    assert busy_cores_warning(2.1, 2, 1, threads_set=False) is None
    assert busy_cores_warning(1.4, 2, 2, threads_set=False) is None  # under 75% of the cores
    assert busy_cores_warning(1.5, 2, 2, threads_set=False) is not None


def test_the_run_prints_it_on_stderr_from_this_machines_load(monkeypatch, capsys):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 8.0, 8.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    warn_if_cores_busy()
    assert "load 8.0 on 4 cores" in capsys.readouterr().err
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    warn_if_cores_busy()
    assert capsys.readouterr().err == ""
