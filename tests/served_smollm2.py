"""One real vLLM server of SmolLM2-135M-Instruct (`lexrl serve`, chat API) shared by the tests
that evaluate a served model through its OpenAI-compatible endpoint: the `openai` rollout
backend and the verifiers and OpenEnv integrations."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SERVED_NAME = "smollm2"

SERVE_CONFIG = """
model:
  name_or_path: smollm2-135m
  cache_dir: {cache}
rollout:
  vllm_served_model: {name}
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
