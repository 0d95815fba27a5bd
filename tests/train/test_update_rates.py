"""lexrl/train/update_rates.json is what docs/data's GPU measurements give, and `lexrl plan`
says which measurement (or assumption) its update rate comes from."""

import subprocess
import sys
from pathlib import Path

from lexrl.train.plan import ASSUMED_FROM, GPUS, UPDATE_RATES
from lexrl.train.plan_report import update_rate_line

ROOT = Path(__file__).parents[2]


def test_the_shipped_rates_are_what_the_measurements_give():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "update_rates.py"), "--check"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]


def test_each_measured_kind_names_its_data_and_the_rest_are_assumed():
    for kind, gpu in GPUS.items():
        line = update_rate_line(gpu)
        if kind in UPDATE_RATES:
            assert gpu.update_efficiency == UPDATE_RATES[kind]["update_efficiency"]
            assert "measured: scripts/gpu_bench.sh" in line and "docs/data/" in line
        else:
            assert gpu.update_efficiency == UPDATE_RATES[ASSUMED_FROM]["update_efficiency"]
            assert "assumed" in line and gpu.name in line
    assert "rtx4090" not in UPDATE_RATES, (
        "a measured RTX 4090: update the docs that call it assumed"
    )
