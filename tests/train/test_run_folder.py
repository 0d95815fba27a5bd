"""A run folder is never reused by accident: a new run in a folder that holds another run's
checkpoints or logged steps is refused and changes nothing; a resume refuses a checkpoint written
with another env, base model or LoRA shape; and a resume with other settings keeps the config the
earlier steps ran with."""

import json
import re
from pathlib import Path

import pytest

from lexrl.config import Config
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.errors import EXIT_CODES, ConfigError, RunFolderTaken
from lexrl.run_lock import LOCK_NAME, refuse_another_run
from lexrl.train.manifest import MANIFEST_FILE, STATE_FILE, build_manifest
from lexrl.train.trainer import changed_keys, checkpoint_to_resume, run_record, save_run_config


def _files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _checkpoint(out: Path, step: int, state: dict) -> Path:
    """A checkpoint holding only its trainer state, complete by its manifest."""
    folder = out / "checkpoints" / f"step-{step:06d}"
    folder.mkdir(parents=True)
    (folder / STATE_FILE).write_text(json.dumps({"step": step, **state}))
    (folder / MANIFEST_FILE).write_text(json.dumps(build_manifest(folder)))
    return folder


def _config(out: Path, resume: bool) -> Config:
    config = Config()
    config.run.output_dir = str(out)
    config.run.resume = resume
    return config


def test_a_folder_holding_a_run_is_refused_naming_what_it_holds_and_both_ways_on(tmp_path):
    _checkpoint(tmp_path, 1, {})
    _checkpoint(tmp_path, 2, {})
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n')
    before = _files(tmp_path)

    with pytest.raises(RunFolderTaken) as raised:
        checkpoint_to_resume(_config(tmp_path, resume=False))

    assert raised.value.exit_code == EXIT_CODES["run folder"] == 7
    assert str(raised.value) == (
        f"{tmp_path} holds another run (checkpoints up to step-000002, metrics.jsonl to step 3): "
        "continue it with `--run.resume true`, or start this run in another `run.output_dir`"
    )
    assert _files(tmp_path) == before


@pytest.mark.parametrize(
    ("name", "text", "found"),
    [
        ("samples.jsonl", '{"step": 4, "role": "planner"}\n', "samples.jsonl to step 4"),
        ("metrics.jsonl", '{"step": 1}\n{"step": 2}\n{"step": 3, "loss', "metrics.jsonl to step 2"),
        ("metrics.jsonl", "not json\n", "metrics.jsonl to step ?"),
    ],
)
def test_logged_steps_alone_are_a_run(tmp_path, name, text, found):
    """A crash may have cut the last line short: the last readable step is named."""
    (tmp_path / name).write_text(text)
    with pytest.raises(RunFolderTaken, match=rf"\({re.escape(found)}\)"):
        refuse_another_run(tmp_path)


def test_a_lock_a_config_a_staging_folder_or_empty_logs_are_no_run(tmp_path):
    (tmp_path / LOCK_NAME).write_text("{}")
    (tmp_path / "config.yaml").write_text("run: {}\n")
    (tmp_path / "metrics.jsonl").write_text("\n")
    (tmp_path / "checkpoints" / ".staging-step-000001").mkdir(parents=True)
    refuse_another_run(tmp_path)
    refuse_another_run(tmp_path / "not-yet-created")


def test_a_resume_refuses_a_checkpoint_of_another_env_model_or_lora_naming_the_keys(tmp_path):
    written = _config(tmp_path, resume=True)
    checkpoint = _checkpoint(tmp_path, 3, {"config": run_record(written)})
    assert checkpoint_to_resume(written).checkpoint == checkpoint
    # The order of the target modules is no other LoRA.
    written.lora.target_modules.reverse()
    assert checkpoint_to_resume(written).checkpoint == checkpoint

    other = _config(tmp_path, resume=True)
    other.env = LexamEnvConfig()
    other.lora.r = 8
    other.lora.alpha = 64
    other.lora.target_modules = ["q_proj"]
    with pytest.raises(ConfigError) as raised:
        checkpoint_to_resume(other)

    message = str(raised.value)
    assert message.startswith(f"checkpoint {checkpoint} belongs to another run: ")
    assert 'env.name is "statute" there, "lexam" here' in message
    assert "lora.r is 16 there, 8 here" in message
    assert "lora.alpha is 32 there, 64 here" in message
    assert 'lora.target_modules is ["down_proj", ' in message and ' ["q_proj"] here' in message
    assert "model.name_or_path" not in message
    assert f"({tmp_path / 'config.yaml'})" in message and "another `run.output_dir`" in message


def test_the_lora_scale_alone_is_another_run_and_a_key_an_older_record_lacks_is_not_checked(
    tmp_path,
):
    written = _config(tmp_path, resume=True)
    older = {k: v for k, v in run_record(written).items() if k != "lora.alpha"}
    checkpoint = _checkpoint(tmp_path, 3, {"config": older})
    scaled = _config(tmp_path, resume=True)
    scaled.lora.alpha = 64
    assert checkpoint_to_resume(scaled).checkpoint == checkpoint
    _checkpoint(tmp_path, 4, {"config": run_record(written)})
    with pytest.raises(ConfigError, match=r"belongs to another run: lora\.alpha is 32 there, 64"):
        checkpoint_to_resume(scaled)


def test_a_checkpoint_written_before_the_record_is_resumed_unchecked(tmp_path):
    checkpoint = _checkpoint(tmp_path, 1, {"position": 2})
    config = _config(tmp_path, resume=True)
    config.env = LexamEnvConfig()
    assert checkpoint_to_resume(config).checkpoint == checkpoint


def test_a_resume_with_other_settings_keeps_the_config_the_earlier_steps_ran_with(tmp_path, capfd):
    first = _config(tmp_path, resume=False)
    save_run_config(first, tmp_path, 0)

    # Resuming (run.resume flipped) with nothing else changed keeps one config.yaml.
    save_run_config(_config(tmp_path, resume=True), tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
    assert capfd.readouterr().err == ""
    original = (tmp_path / "config.yaml").read_text()

    longer = _config(tmp_path, resume=True)
    longer.run.max_steps = 200
    for step in (2, 2):
        save_run_config(longer, tmp_path, step)
        longer.run.max_steps += 100
    kept = tmp_path / "config.until-step-000002.yaml"
    assert kept.read_text() == original
    assert "max_steps: 200" in (tmp_path / "config.until-step-000002-2.yaml").read_text()
    assert "max_steps: 300" in (tmp_path / "config.yaml").read_text()
    said = " ".join(capfd.readouterr().err.split())
    assert (
        f"{tmp_path / 'config.yaml'} had other settings (run.max_steps 60 -> 200): kept as {kept}"
    ) in said
    assert "(run.max_steps 200 -> 300)" in said


def test_changed_keys_are_dotted_and_name_a_key_one_side_lacks():
    before = {"run": {"max_steps": 1, "seed": 0}, "grpo": {"beta": 0.0}, "eval": None}
    after = {"run": {"max_steps": 2, "seed": 0}, "grpo": {}, "eval": {"greedy": True}}
    assert changed_keys(before, after) == [
        ("eval", None, {"greedy": True}),
        ("grpo.beta", 0.0, None),
        ("run.max_steps", 1, 2),
    ]


def test_a_resume_refuses_other_env_options_naming_each_and_allows_the_run_keys(tmp_path):
    written = _config(tmp_path, resume=True)
    checkpoint = _checkpoint(tmp_path, 3, {"config": run_record(written)})
    later = _config(tmp_path, resume=True)
    later.run.max_steps += 10
    later.grpo.learning_rate *= 2
    assert checkpoint_to_resume(later).checkpoint == checkpoint

    other = _config(tmp_path, resume=True)
    # Where a service runs, and how the run is evaluated, may change.
    later.env.retrieval.device = "cuda:1"
    later.env.retrieval.index_dir = str(tmp_path / "moved-index")
    later.env.eval.ks = [1, 3]
    assert checkpoint_to_resume(later).checkpoint == checkpoint

    other = _config(tmp_path, resume=True)
    other.env.step_penalty = written.env.step_penalty + 0.5
    other.env.retrieval.bm25_variant = "robertson"
    with pytest.raises(ConfigError) as raised:
        checkpoint_to_resume(other)
    message = str(raised.value)
    assert f"env.step_penalty is {written.env.step_penalty} there, " in message
    assert 'env.retrieval.bm25_variant is "lucene" there, "robertson" here' in message
    assert "env.retrieval.device" not in message and "env.eval" not in message


def _error_lines(stderr: str, kind: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{kind} error: ")]


@pytest.mark.slow
def test_a_second_train_into_a_finished_folder_is_refused_and_loses_nothing(
    lexrl_in_process, finished_run
):
    config, out = finished_run
    before = _files(out)
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1

    result = lexrl_in_process("train", str(config))

    assert result.returncode == 7, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    [line] = _error_lines(result.stderr, "run folder")
    assert line == (
        f"run folder error: {out} holds another run (checkpoints up to step-000001, "
        "metrics.jsonl to step 1, samples.jsonl to step 1): continue it with `--run.resume "
        "true`, or start this run in another `run.output_dir`"
    )
    assert _files(out) == before


@pytest.mark.slow
def test_a_resume_with_another_lora_rank_is_refused_and_loses_nothing(
    lexrl_in_process, finished_run
):
    config, out = finished_run
    before = _files(out)

    result = lexrl_in_process("train", str(config), "--run.resume", "true", "--lora.r", "8")

    assert result.returncode == 2, result.stderr[-3000:]
    [line] = _error_lines(result.stderr, "config")
    assert line.startswith(
        f"config error: checkpoint {out / 'checkpoints' / 'step-000001'} belongs to another "
        "run: lora.r is 4 there, 8 here; resume it with the values it was written with"
    ), line
    assert _files(out) == before
