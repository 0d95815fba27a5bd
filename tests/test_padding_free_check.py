"""scripts/padding_free_check.py on the CPU: the check a GPU runs for `grpo.padding_free`, here
through the dense mask, on a random Qwen3 with grouped query heads (the tiny model has none)."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "padding_free_check.py"


def test_every_layout_matches_the_padded_rows_with_grouped_query_heads():
    spec = importlib.util.spec_from_file_location("padding_free_check", SCRIPT)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
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
