"""A judge whose reply carries the API key (a proxy that echoes the request's headers into the
text it returns) must not put the key into any file of the run: the sample turns (samples.jsonl
and the W&B table), the metrics, the W&B offline files and the judge's on-disk cache."""

import json
from pathlib import Path

import pytest

from lexrl.cli import main
from tests.chat_stub import chat_server, completion

KEY = "sk-lexrl-echoed-canary-8d41c07a2e9f"
KEY_ENV = "LEXRL_TEST_ECHOED_KEY"

RUN = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 8
grpo:
  num_generations: 2
  tasks_per_step: 1
env:
  type: lexam
  config: open_question
  judge_cache_dir: {judge_cache}
  judges:
    - base_url: {url}
      model: judge
      api_key_env: {key_env}
      max_retries: 0
      max_parse_retries: 0
logging:
  wandb_mode: offline
  samples_every: 1
run:
  output_dir: {out}
  max_steps: 2
  save_every: 1
  # The evaluation files have their own writer (lexrl/eval/evaluate.py).
  eval_before: false
  eval_after: false
"""


@pytest.fixture()
def echoing_judge():
    """An OpenAI-compatible judge whose every reply quotes the request's Authorization header
    before its score."""

    def answer(headers) -> tuple[int, bytes]:
        return 200, completion(f"Seen: Authorization: {headers['Authorization']}. Fair. [[0.6]]")

    with chat_server(answer) as url:
        yield url


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_a_key_echoed_in_the_judges_replies_reaches_no_file(
    echoing_judge, tmp_path, model_cache, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    out, judge_cache = tmp_path / "run", tmp_path / "judge_cache"
    config = tmp_path / "config.yaml"
    config.write_text(
        RUN.format(
            cache=model_cache, judge_cache=judge_cache, url=echoing_judge, key_env=KEY_ENV, out=out
        )
    )

    main(["train", str(config)])

    run_files, cache_files = files_under(out), files_under(judge_cache)
    # The scan covers what carries the replies: nothing is vacuously clean.
    assert {"metrics.jsonl", "samples.jsonl"} <= set(run_files)
    assert any(name.endswith(".wandb") for name in run_files), sorted(run_files)
    assert any(name.endswith(".table.json") for name in run_files), "no W&B samples table"
    assert cache_files, "no judgment was cached"
    samples = run_files["samples.jsonl"].decode()
    assert "Seen: Authorization: Bearer ***" in samples, "the judge's turns are in the samples"
    leaks = [name for name, data in {**run_files, **cache_files}.items() if KEY.encode() in data]
    assert leaks == []
    metrics = [json.loads(line) for line in run_files["metrics.jsonl"].splitlines()]
    assert [m["reward/total"] for m in metrics] == [pytest.approx(0.6)] * 2
