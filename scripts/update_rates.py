"""Write lexrl/train/update_rates.json, the update rate `lexrl plan` uses per GPU kind, from the
measurements in docs/data/ (the JSON lines scripts/gpu_bench.sh wrote on lent GPUs).

    python scripts/update_rates.py           # rewrite the file
    python scripts/update_rates.py --check   # exit 1 if the file is not what docs/data gives

A GPU's rate is the achieved share of its dense bf16 peak in a real `Learner.update`: the
FLOPs `lexrl.train.plan.update_seconds` counts for the measured workload at 100% of the peak,
divided by the measured seconds. Each kind takes the mean over its design-workload lines of
`SOURCES` (a random Qwen3-4B, 36 layers, 16 trajectories of 4 x (1,500 + 200) tokens,
micro-batches of 8,192 tokens, no shared prefixes, checkpointing on and off). A kind without a
measurement is not in the file: the plan marks it as assumed. tests/train/test_update_rates.py
runs `--check`, so the shipped numbers cannot drift from the data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_bench  # noqa: E402

from lexrl.train.plan import UPDATE_RATES_FILE, gpu_for, update_seconds  # noqa: E402

SOURCES = {
    "h100": "docs/data/gpu_bench_h100_2026-11-26_rerun.jsonl",
    "h200": "docs/data/gpu_bench_h200_2026-11-26_mask.jsonl",
}
"""The measurement each GPU kind's rate comes from: the newest full run of scripts/gpu_bench.sh
on that kind."""
DESIGN = {
    "layers": 36,
    "tokens": "4x1500+200",
    "trajectories": 16,
    "micro_batch_tokens": 8192,
    "shared_prefix": False,
}


def line_efficiency(line: dict) -> float:
    """The update's achieved share of the GPU's bf16 peak in one gpu_bench.py line."""
    key = gpu_bench.gpu_key(line["device_name"])
    ideal = dataclasses.replace(gpu_for(None, key), update_efficiency=1.0)
    shape, profile, settings, layout = gpu_bench.plan_inputs(line)
    return update_seconds(shape, profile, settings, layout, ideal) / line["update_s"]


def rates() -> dict[str, dict]:
    out = {}
    for kind, path in SOURCES.items():
        lines = (ROOT / path).read_text().splitlines()
        numbers, each = [], []
        for number, text in enumerate(lines, start=1):
            line = json.loads(text)
            if line.get("status") != "ok" or any(line[k] != v for k, v in DESIGN.items()):
                continue
            numbers.append(number)
            each.append(round(line_efficiency(line), 4))
            device, versions = line["device_name"], line["versions"]
        out[kind] = {
            "update_efficiency": round(statistics.mean(each), 3),
            "measured": f"scripts/gpu_bench.sh on an {device} (torch {versions['torch']}), "
            f"{path} lines {', '.join(map(str, numbers))}",
            "each": each,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = json.dumps(rates(), indent=2) + "\n"
    if args.check:
        if UPDATE_RATES_FILE.read_text() != text:
            print(f"{UPDATE_RATES_FILE} differs from what docs/data gives:\n{text}")
            return 1
        print(f"{UPDATE_RATES_FILE} matches docs/data")
        return 0
    UPDATE_RATES_FILE.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
