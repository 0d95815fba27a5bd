"""One real vLLM server of SmolLM2-135M-Instruct (`lexrl serve`, chat API) shared by the tests
that evaluate a served model through its OpenAI-compatible endpoint: the `openai` rollout
backend and the verifiers and OpenEnv integrations."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SERVED_NAME = "smollm2"

SERVE_CONFIG = """
model:
  name_or_path: smollm2-135m
  cache_dir: {cache}
rollout:
  vllm_served_model: {name}
  # The judge tests' longest LEXam judge prompt is about 3,200 SmolLM2 tokens; re-asks add ~250.
  vllm_max_model_len: 4096
warmstart:
  enabled: false
run:
  output_dir: {out}
"""


@dataclass(frozen=True)
class ServedModel:
    base_url: str
    """With the `/v1` prefix, as OpenAI clients take it."""
    model: str
    """The served model's name."""
    process: object


def write_serve_config(path: Path, cache: str, out: Path) -> Path:
    path.write_text(SERVE_CONFIG.format(cache=cache, name=SERVED_NAME, out=out))
    return path


MIXTURE_CONFIG = "configs/legal_mix_cpu.yaml"
MIXTURE_TASKS = 4
"""Test tasks of each member in `mixture_eval`."""


@dataclass(frozen=True)
class MixtureEval:
    """`lexrl eval` of the CPU mixture through the `openai` backend on the served SmolLM2."""

    report: dict
    rows: list[dict]


def openai_options(base_url: str, model: str, cache: Path | str) -> list[str]:
    """`lexrl eval`'s options for `model` behind `base_url`, its replies cached in `cache`
    ("" for none)."""
    return [
        "--rollout.backend", "openai",
        "--rollout.base_url", base_url,
        "--model.name_or_path", model,
        "--rollout.chat_cache_dir", str(cache),
    ]  # fmt: skip


def report_of(out: Path) -> tuple[dict, list[dict]]:
    """The report and the rows of the one evaluation under `out`."""
    (folder,) = (out / "eval").iterdir()
    report = json.loads((folder / "eval_test_report.json").read_text())
    rows = [json.loads(line) for line in (folder / "eval_test.jsonl").read_text().splitlines()]
    return report, rows


def evaluate_the_mixture(served: ServedModel, out: Path) -> MixtureEval:
    """Greedy, one sample of the first `MIXTURE_TASKS` test tasks of each member, 48 new tokens,
    the server's token ids asked for, no reply cache, the degenerate baselines beside it."""
    command = [
        sys.executable, "-m", "lexrl.cli", "eval", MIXTURE_CONFIG,
        *openai_options(served.base_url, served.model, ""),
        "--rollout.chat_token_ids", "true",
        "--rollout.max_new_tokens", "48",
        "--eval.max_tasks", str(MIXTURE_TASKS),
        "--eval.samples_per_task", "1",
        "--eval.greedy", "true",
        "--run.output_dir", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return MixtureEval(*report_of(out))
