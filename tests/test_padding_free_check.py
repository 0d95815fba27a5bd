"""scripts/padding_free_check.py on the CPU: the check a GPU runs for `grpo.padding_free`, here
through the dense mask, on a random Qwen3 with grouped query heads (the tiny model has none)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "padding_free_check.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("padding_free_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_layout_matches_the_padded_rows_with_grouped_query_heads(check):
    lines = check.check("cpu", "float32", layers=1, checkpointing=True, tolerance=1e-4)
    assert [line["layout"] for line in lines] == [
        "shared",
        "padding_free",
        "padding_free+shared",
        "padding_free+checkpointing",
        "padding_free+shared+checkpointing",
    ]
    assert all(line["ok"] for line in lines), lines
    by_layout = {line["layout"]: line for line in lines}
    assert by_layout["padding_free+shared"]["tokens"] < by_layout["shared"]["tokens"]
    assert by_layout["shared"]["tokens"] < by_layout["shared"]["padded_tokens"]


def test_a_layout_that_raises_is_a_line_and_the_others_still_run(check, monkeypatch):
    real = check.logprobs_and_gradients

    def fails_without_shared_prefixes(policy, batch):
        if "pack_ids" in batch and int(batch["segment_ids"].max()) == 1:
            raise RuntimeError("no kernel for this layout\nsecond line")
        return real(policy, batch)

    monkeypatch.setattr(check, "logprobs_and_gradients", fails_without_shared_prefixes)
    lines = check.check("cpu", "float32", layers=1, checkpointing=False, tolerance=1e-4)
    by_layout = {line["layout"]: line for line in lines}
    assert by_layout["padding_free"]["error"] == "RuntimeError: no kernel for this layout"
    assert not by_layout["padding_free"]["ok"]
    assert by_layout["shared"]["ok"] and by_layout["padding_free+shared"]["ok"]
