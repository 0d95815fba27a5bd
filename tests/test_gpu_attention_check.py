"""scripts/gpu_attention_check.py on the CPU: every way it passes the grouped attention's masks
computes lexrl's attention, and a backend that cannot run is a row, not a crash."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gpu_attention_check.py"


def test_every_form_equals_lexrls_attention_on_the_cpu(tmp_path):
    args = ["--device", "cpu", "--dtype", "float32", "--prefix", "24", "--suffix", "6"]
    args += ["--suffixes", "3", "--packs", "2"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=True,
        env={"OUT": str(tmp_path), "PATH": ""},
    )
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    header, measured = rows[0], rows[1:]
    assert header["shape"]["suffixes"] == 3
    forms = {r["form"] for r in measured}
    assert forms == {
        "lexrl",
        "bool",
        "float",
        "bool_padded",
        "float_padded",
        "gqa",
        "repeated_rows",
    }
    ran = [r for r in measured if r["ok"] and r["form"] != "repeated_rows"]
    assert {r["form"] for r in ran} == forms - {"repeated_rows"}
    assert all(r["max_abs_diff"] < 1e-5 for r in ran), [r for r in ran if r["max_abs_diff"] >= 1e-5]
    # CUDA's memory-efficient kernel does not exist on the CPU: refused, reported with the reason.
    refused = [r for r in measured if r["backend"] == "efficient"]
    assert refused and not any(r["ok"] for r in refused)
    assert all("backend" in r["error"] for r in refused)
    assert (tmp_path / "gpu_attention_check.jsonl").read_text().count("\n") == len(rows)
