"""Bad inputs, one row each, through the real `lexrl` command line.

Each row is a bad config value, config file, data file, checkpoint state, held run folder or
endpoint. Every row checks the exit code of its kind (`lexrl.errors.EXIT_CODES`), that the first
line of stderr (past any progress bar) names the key, file or URL, that no traceback is printed, and that no run folder
is written where no run may start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lexrl.errors import EXIT_CODES
from tests.e2e import lexrl_command

ROOT = Path(__file__).parents[1]
DEMO = str(ROOT / "configs" / "demo_cpu.yaml")

CORPUS = [
    {"id": "a1", "name": "Art. 1", "content": "A contract binds the parties who made it."},
    {"id": "a2", "name": "Art. 2", "content": "Damages compensate the loss a breach caused."},
    {"id": "a3", "name": "Art. 3", "content": "A minor may not sell land without a guardian."},
]
QUERIES = [
    {"id": "q1", "query": "Who is bound by a contract?", "gold": ["a1"]},
    {"id": "q2", "query": "What do damages compensate?", "gold": ["a2"]},
]


def write_jsonl(path: Path, rows: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [json.dumps(row) for row in rows] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def statute_files(tmp: Path, corpus: list[dict] = CORPUS, extra: tuple[str, ...] = ()) -> list:
    """Overrides for a small `jsonl` statute dataset in `tmp`."""
    write_jsonl(tmp / "corpus.jsonl", corpus)
    for split in ("train", "test"):
        write_jsonl(tmp / f"q_{split}.jsonl", QUERIES, extra)
    return [
        "--env.dataset", "jsonl",
        "--env.corpus_path", str(tmp / "corpus.jsonl"),
        "--env.queries_path", str(tmp / "q_{split}.jsonl"),
    ]  # fmt: skip


def yaml_file(tmp: Path, text: str | bytes, name: str = "bad.yaml") -> str:
    path = tmp / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


@dataclass
class Row:
    name: str
    kind: str
    """Its `EXIT_CODES` key: the exit code it must end with."""
    args: Callable[[Path], list[str]]
    """The command line after `lexrl`, from the test's folder."""
    names: Callable[[Path], list[str]]
    """What the first line of stderr must contain (a key, file or URL)."""
    run_folder: bool = True
    """The command may create `<tmp>/run`: with True the row checks it did not."""
    env: dict[str, str] = field(default_factory=dict)


def train(*overrides: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["train", DEMO, "--run.output_dir", str(tmp / "run"), *overrides]


def plain_config(tmp: Path) -> str:
    """A config that sets no env options, so that `--env.type` may pick any env (a file's env
    options belong to its own env)."""
    return yaml_file(tmp, "eval:\n  max_tasks: 2\n", "plain.yaml")


def train_defaults(*overrides: str) -> Callable[[Path], list[str]]:
    """`lexrl train` of `plain_config`."""
    return lambda tmp: [
        "train",
        plain_config(tmp),
        "--run.output_dir",
        str(tmp / "run"),
        *overrides,
    ]


def evaluate(*overrides: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["eval", DEMO, "--run.output_dir", str(tmp / "run"), *overrides]


def key(name: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [name]


CONFIG_VALUES = [
    ("max_steps_negative", train("--run.max_steps", "-5"), "run.max_steps"),
    ("max_steps_zero", train("--run.max_steps", "0"), "run.max_steps"),
    ("save_every_zero", train("--run.save_every", "0"), "run.save_every"),
    ("learning_rate_negative", train("--grpo.learning_rate", "-1"), "grpo.learning_rate"),
    ("micro_batch_size_zero", train("--grpo.micro_batch_size", "0"), "grpo.micro_batch_size"),
    ("lora_rank_zero", train("--lora.r", "0"), "lora.r"),
    ("lora_dropout_above_one", train("--lora.dropout", "1.5"), "lora.dropout"),
    ("max_tasks_negative", evaluate("--eval.max_tasks", "-1"), "eval.max_tasks"),
    ("one_generation", train("--grpo.num_generations", "1"), "grpo.num_generations"),
    ("tasks_per_step_zero", train("--grpo.tasks_per_step", "0"), "grpo.tasks_per_step"),
    ("unknown_backend", train("--rollout.backend", "tgi"), "rollout.backend"),
    ("unknown_loss", train("--grpo.loss", "ppo2"), "grpo.loss"),
    ("unknown_env", train("--env.type", "nonexistent"), "env.type"),
    ("old_env_name", train("--env.name", "lexam"), "env.type"),
    ("old_env_section", train("--env.statute.alpha", "0.3"), "--env.alpha"),
    ("log_every_zero", train("--logging.log_every", "0"), "logging.log_every"),
    ("max_new_tokens_zero", train("--rollout.max_new_tokens", "0"), "rollout.max_new_tokens"),
    (
        "gpu_share_above_one",
        train("--rollout.vllm_gpu_memory_utilization", "1.5"),
        "rollout.vllm_gpu_memory_utilization",
    ),
    ("unknown_dtype", train("--model.dtype", "float8"), "model.dtype"),
    ("max_failed_steps_negative", train("--run.max_failed_steps", "-1"), "run.max_failed_steps"),
    ("eval_samples_zero", evaluate("--eval.samples_per_task", "0"), "eval.samples_per_task"),
    ("mistyped_option", train("--grpo.nume_generations", "3"), "grpo.num_generations"),
    ("wrong_type", train("--grpo.num_generations", "many"), "num_generations"),
    ("mix_without_members", train_defaults("--env.type", "mix"), "env.members"),
    ("options_of_another_env", train("--env.type", "lexam"), "LexamEnvConfig"),
    (
        "a_key_in_api_key_env",
        train("--env.retrieval.api_key_env", "sk-abc123"),
        "env.retrieval.api_key_env",
    ),
    (
        "credentials_in_a_url",
        train("--rollout.vllm_urls", "[http://user:pw@host:8000]"),
        "rollout.vllm_urls",
    ),
]

ROWS = [Row(name, "config", args, key(named)) for name, args, named in CONFIG_VALUES]

ROWS += [
    Row(
        "config_file_missing",
        "config",
        lambda tmp: ["train", str(tmp / "nope.yaml")],
        lambda tmp: [str(tmp / "nope.yaml")],
    ),
    Row(
        "yaml_syntax_error",
        "config",
        lambda tmp: ["train", yaml_file(tmp, "run:\n  max_steps: 3\n  seed: [1, 2\n")],
        lambda tmp: [f"{tmp / 'bad.yaml'}:"],
    ),
    Row(
        "yaml_not_utf8",
        "config",
        lambda tmp: ["train", yaml_file(tmp, b"run:\n  output_dir: caf\xe9\n")],
        lambda tmp: [str(tmp / "bad.yaml")],
    ),
    Row(
        "yaml_top_level_list",
        "config",
        lambda tmp: ["train", yaml_file(tmp, "- run\n- grpo\n")],
        lambda tmp: [str(tmp / "bad.yaml")],
    ),
    Row(
        "yaml_unknown_key",
        "config",
        lambda tmp: ["train", yaml_file(tmp, "grpo:\n  lr: 0.1\n")],
        lambda tmp: [str(tmp / "bad.yaml"), "lr"],
    ),
    Row(
        "yaml_moved_key",
        "config",
        lambda tmp: ["train", yaml_file(tmp, "eval:\n  ks: [1, 5]\n")],
        lambda tmp: [str(tmp / "bad.yaml"), "env.eval.ks"],
    ),
    Row(
        "yaml_old_env_section",
        "config",
        lambda tmp: ["train", yaml_file(tmp, "env:\n  name: lexam\n  lexam:\n    source: x\n")],
        lambda tmp: [str(tmp / "bad.yaml"), "`env.name` moved to `env.type`"],
    ),
    Row(
        "yaml_old_env_options",
        "config",
        lambda tmp: ["train", yaml_file(tmp, "env:\n  lexam:\n    source: x\n")],
        lambda tmp: [str(tmp / "bad.yaml"), "`env.lexam.*` moved", "env.type: lexam"],
    ),
    Row("envs_unknown_name", "config", lambda tmp: ["envs", "nonexistent"], key("nonexistent")),
    Row(
        "plan_unknown_gpu",
        "plan",
        lambda tmp: ["plan", DEMO, "--gpu", "tpu9"],
        key("tpu9"),
    ),
    Row(
        "plan_bad_tokens",
        "plan",
        lambda tmp: ["plan", DEMO, "--tokens", "lots"],
        key("lots"),
    ),
    Row(
        "checkpoint_missing",
        "checkpoint",
        lambda tmp: ["eval", DEMO, "--checkpoint", str(tmp / "run" / "checkpoints" / "step-3")],
        lambda tmp: [str(tmp / "run" / "checkpoints" / "step-3")],
    ),
]


def damaged_checkpoint(tmp: Path, damage: str) -> Path:
    """A checkpoint folder as `lexrl train` writes it (files, then the manifest), then damaged:
    `truncate` the adapter, `flip` a byte of it, or `unlisted` (no manifest entry for it)."""
    from lexrl.train.manifest import MANIFEST_FILE, build_manifest

    folder = tmp / "run" / "checkpoints" / "step-000003"
    (folder / "adapter").mkdir(parents=True)
    weights = folder / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(bytes(range(256)) * 16)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "trainer_state.json").write_text('{"step": 3}')
    (folder / MANIFEST_FILE).write_text(json.dumps(build_manifest(folder)))
    data = bytearray(weights.read_bytes())
    if damage == "truncate":
        weights.write_bytes(data[:100])
    elif damage == "flip":
        data[7] ^= 1
        weights.write_bytes(bytes(data))
    return folder


def eval_checkpoint(damage: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["eval", DEMO, "--checkpoint", str(damaged_checkpoint(tmp, damage))]


ROWS += [
    Row(
        f"checkpoint_{damage}",
        "checkpoint",
        eval_checkpoint(damage),
        lambda tmp: [str(tmp / "run" / "checkpoints" / "step-000003"), "adapter_model"],
        run_folder=False,
    )
    for damage in ("truncate", "flip")
]


def eval_baselines(*overrides: str) -> Callable[[Path], list[str]]:
    """`lexrl eval` of the env's baselines only (no model) on the small statute dataset."""
    return lambda tmp: [
        "eval", DEMO, "--eval.policy", "false", "--run.output_dir", str(tmp / "run"),
        *statute_files(tmp), *overrides,
    ]  # fmt: skip


def eval_with(
    files: Callable[[Path], list[str]], config: Callable[[Path], str] = lambda tmp: DEMO
) -> Callable[[Path], list[str]]:
    """`lexrl eval` of the baselines only, of `config` with `files`."""
    return lambda tmp: [
        "eval", config(tmp), "--eval.policy", "false", "--run.output_dir", str(tmp / "run"),
        *files(tmp),
    ]  # fmt: skip


def malformed_line(tmp: Path) -> list[str]:
    return statute_files(tmp, extra=('{"id": "q3", "query": "cut',))


def duplicate_corpus_id(tmp: Path) -> list[str]:
    return statute_files(tmp, corpus=[*CORPUS, {**CORPUS[0], "content": "another text"}])


def empty_queries(tmp: Path) -> list[str]:
    overrides = statute_files(tmp)
    (tmp / "q_test.jsonl").write_text("", encoding="utf-8")
    return overrides


def missing_corpus(tmp: Path) -> list[str]:
    overrides = statute_files(tmp)
    (tmp / "corpus.jsonl").unlink()
    return overrides


def lexam_without_extension(tmp: Path) -> list[str]:
    (tmp / "lexam_mcq").write_text("not a table", encoding="utf-8")
    return ["--env.type", "lexam", "--env.source", str(tmp / "lexam_mcq")]


ROWS += [
    Row("data_malformed_line", "data", eval_with(malformed_line), lambda tmp: [f"{tmp}/q_"]),
    Row(
        "data_duplicate_corpus_id",
        "data",
        eval_with(duplicate_corpus_id),
        lambda tmp: [f"{tmp / 'corpus.jsonl'}:1", f"{tmp / 'corpus.jsonl'}:4", "a1"],
    ),
    Row(
        "data_empty_queries",
        "data",
        eval_with(empty_queries),
        lambda tmp: [f"{tmp / 'q_test.jsonl'}"],
    ),
    Row(
        "data_missing_corpus",
        "data",
        eval_with(missing_corpus),
        lambda tmp: [f"{tmp / 'corpus.jsonl'}"],
    ),
    Row(
        "data_lexam_path_without_extension",
        "data",
        eval_with(lexam_without_extension, config=plain_config),
        lambda tmp: [str(tmp / "lexam_mcq")],
    ),
    Row(
        "endpoint_dense_server_down",
        "endpoint",
        lambda tmp: [
            "index",
            DEMO,
            "--env.retrieval.dense_model",
            "served-embedder",
            "--env.retrieval.dense_endpoint",
            "http://127.0.0.1:9/v1",
            "--env.retrieval.index_dir",
            str(tmp / "index"),
        ],  # fmt: skip
        key("http://127.0.0.1:9/v1/embeddings"),
    ),
    Row(
        "model_not_local_not_on_the_hub",
        "model",
        evaluate("--model.name_or_path", "no-such-org/no-such-llm", "--warmstart.enabled", "false"),
        key("model.name_or_path"),
    ),
]


def run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "WANDB_API_KEY": "",
        "WANDB_SILENT": "true",
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }
    return subprocess.run(
        lexrl_command(*args), capture_output=True, text=True, timeout=600, env=environment
    )


def check(result: subprocess.CompletedProcess, kind: str, names: list[str]) -> None:
    stderr = result.stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    assert result.returncode == EXIT_CODES[kind], (result.returncode, stderr[-2000:])
    # A progress bar drawn before the failure is terminal chrome, not a message.
    first = next(line for line in stderr.splitlines() if line.strip() and "%|" not in line)
    assert first.startswith(f"{kind} error: "), first
    for name in names:
        assert name in first, (name, first)


def test_the_table_is_large_and_covers_every_kind():
    assert len(ROWS) >= 40
    assert len({row.name for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input(row: Row, tmp_path: Path):
    result = run(row.args(tmp_path), row.env)
    check(result, row.kind, row.names(tmp_path))
    if row.run_folder:
        assert not (tmp_path / "run").exists(), sorted((tmp_path / "run").rglob("*"))


def test_a_second_run_into_a_held_folder_is_refused_and_writes_nothing(tmp_path):
    folder = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from lexrl.run_lock import hold_run_folder\n"
            f"with hold_run_folder({str(folder)!r}):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        (folder / "metrics.jsonl").write_text('{"step": 1}\n')
        before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        result = run(train()(tmp_path))
        check(result, "run folder", [str(folder), f"PID {holder.pid}"])
        after = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        assert after == before
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
