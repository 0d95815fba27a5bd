"""torch's threads for a CPU run started on cores that other work keeps busy."""

import os

import torch

from lexrl.train.busy_cores import choose_torch_threads, free_cores_share


def test_a_busy_cpu_gets_the_cores_its_load_leaves_free():
    assert free_cores_share(load=2.1, cores=2, threads=2) == 1
    assert free_cores_share(1.0, 2, 2) == 1  # one busy core of two: 1 thread, not 2
    assert free_cores_share(12.5, 16, 16) == 3
    assert free_cores_share(40.0, 16, 16) == 1  # never fewer than one thread
    # Free cores, or no more threads than the share already: torch's count stays.
    assert free_cores_share(0.9, 2, 2) is None
    assert free_cores_share(12.5, 16, 3) is None
    assert free_cores_share(2.1, 2, 1) is None


def on_a_cpu(monkeypatch, load: float, cores: int, threads: int) -> list[int]:
    """This machine made a CPU-only one with `cores` cores at `load`, torch at `threads`
    threads; returns the list that records each `torch.set_num_threads`."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    set_to: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    return set_to


def test_on_busy_cores_lexrl_picks_the_threads_and_says_so(monkeypatch, capsys):
    set_to = on_a_cpu(monkeypatch, load=2.3, cores=2, threads=2)
    assert choose_torch_threads(None, announce=True) == 1 and set_to == [1]
    line = capsys.readouterr().err
    assert line.count("\n") == 1 and "torch threads: 1" in line and "load 2.3 on 2" in line
    assert "OMP_NUM_THREADS" in line and "--run.torch_threads" in line
    # Other processes of the run pick the same and stay quiet.
    assert choose_torch_threads(None, announce=False) == 1 and set_to == [1, 1]
    assert capsys.readouterr().err == ""


def test_the_users_choice_wins_and_idle_cores_keep_torchs_default(monkeypatch, capsys):
    set_to = on_a_cpu(monkeypatch, load=2.3, cores=2, threads=2)
    assert choose_torch_threads(2, announce=True) == 2 and set_to == [2]
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert choose_torch_threads(None, announce=True) == 2 and set_to == [2]
    set_to = on_a_cpu(monkeypatch, load=0.5, cores=2, threads=2)
    assert choose_torch_threads(None, announce=True) == 2 and set_to == []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    assert choose_torch_threads(None, announce=True) == 2 and set_to == []
    assert capsys.readouterr().err == ""
