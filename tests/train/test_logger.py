"""`metrics.jsonl` and `samples.jsonl` cut by a kill while a line was appended: resume drops the
torn last line with a warning naming the file and appends after whole lines; a line damaged
before the last is a data error naming file:line."""

import json

import pytest

from lexrl.config import Config
from lexrl.errors import ConfigError, DatasetError
from lexrl.eval.plots import plot_learning_curve
from lexrl.jsonl import read_appended, step_record
from lexrl.train.logger import RunLogger, resolve_wandb_mode

LINES = [{"step": 1, "reward/total": 0.5}, {"step": 2, "reward/total": 0.25}]
SAMPLE = json.dumps({"step": 3, "completion": "§ 823 BGB"}, ensure_ascii=False).encode()

TORN = {
    "cut mid-JSON": b'{"step": 3, "reward/to',
    # Up to the first byte of `§` (0xC2 0xA7): the line does not decode.
    "cut inside a UTF-8 character": SAMPLE[: SAMPLE.index(b"\xc2") + 1],
    "a list": b"[3, 0.5]\n",
    "a string": b'"step"\n',
    "an object without a step": b'{"reward/total": 0.5}\n',
}


def _logger(tmp_path) -> RunLogger:
    config = Config()
    config.logging.wandb_mode = "disabled"
    return RunLogger(config, tmp_path, enabled=True, resume=True)


def _text(records: list[dict]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def test_the_utf8_case_really_cuts_a_character():
    with pytest.raises(UnicodeDecodeError):
        TORN["cut inside a UTF-8 character"].decode("utf-8")


@pytest.mark.parametrize("name", ["metrics.jsonl", "samples.jsonl"])
@pytest.mark.parametrize("tail", TORN.values(), ids=TORN.keys())
def test_resume_drops_a_torn_last_line_and_appends_after_whole_lines(tmp_path, capsys, name, tail):
    path = tmp_path / name
    path.write_bytes(_text(LINES).encode() + tail)
    logger = _logger(tmp_path)
    logger.truncate_after(1)
    assert path.read_text(encoding="utf-8") == _text(LINES[:1])
    assert f"warning: {path}:3: dropped its last line" in capsys.readouterr().err
    logger.log(2, {"reward/total": 0.75})
    logger.log_samples(2, [{"role": "planner"}])
    assert [record["step"] for _, record in read_appended(path, step_record)] == [1, 2]


@pytest.mark.parametrize("damage", TORN.values(), ids=TORN.keys())
def test_a_line_damaged_before_the_last_is_a_data_error_naming_it(tmp_path, damage):
    path = tmp_path / "metrics.jsonl"
    text = _text(LINES[:1]).encode() + damage.rstrip(b"\n") + b"\n" + _text(LINES[1:]).encode()
    path.write_bytes(text)
    with pytest.raises(DatasetError, match=f"^{path}:2 cannot be read") as error:
        _logger(tmp_path).truncate_after(2)
    assert error.value.exit_code == 3
    assert path.read_bytes() == text


def test_a_whole_last_record_without_its_newline_is_kept_and_ended(tmp_path, capsys):
    path = tmp_path / "metrics.jsonl"
    path.write_text(_text(LINES).rstrip("\n"), encoding="utf-8")
    assert [record for _, record in read_appended(path, step_record)] == LINES
    assert path.read_text(encoding="utf-8") == _text(LINES)
    assert capsys.readouterr().err == ""


def test_the_learning_curve_reads_a_metrics_file_cut_by_a_kill(tmp_path):
    (tmp_path / "metrics.jsonl").write_bytes(_text(LINES).encode() + TORN["cut mid-JSON"])
    assert plot_learning_curve(tmp_path, {}).is_file()
    assert (tmp_path / "metrics.jsonl").read_text(encoding="utf-8") == _text(LINES)


def test_wandb_mode_from_the_environment_wins_over_the_config(tmp_path, monkeypatch):
    config = Config()
    config.logging.wandb_mode = "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert resolve_wandb_mode(config.logging) == "disabled"
    RunLogger(config, tmp_path, enabled=True, resume=False)
    assert not (tmp_path / "wandb").exists() and not (tmp_path / "wandb_run_id").exists()
    monkeypatch.setenv("WANDB_MODE", "dryrun")
    assert resolve_wandb_mode(config.logging) == "offline"
    monkeypatch.setenv("WANDB_MODE", "of")
    with pytest.raises(ConfigError, match="WANDB_MODE=of: not a W&B mode"):
        resolve_wandb_mode(config.logging)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    assert resolve_wandb_mode(config.logging) == "disabled"
    monkeypatch.delenv("WANDB_DISABLED")
    monkeypatch.delenv("WANDB_MODE")
    assert resolve_wandb_mode(config.logging) == "offline"
    config.logging.wandb_mode = "auto"
    monkeypatch.setenv("WANDB_API_KEY", "")
    assert resolve_wandb_mode(config.logging) == "offline"
