"""`--help` that helps: every command's help starts with its own flags and fits a screen, the
full key list is one flag away (`--help-all`), and `lexrl config show` documents one section."""

from __future__ import annotations

from dataclasses import fields

import pytest

from lexrl.cli import main
from lexrl.config import Config, ConfigError, option_names
from lexrl.help import MOST_USED, SECTIONS, first_sentence, section_paths, show_section

OWN_FLAGS = {
    "train": ["--help-all"],
    "plan": ["--gpus", "--gpu-memory", "--layout", "--trajectories", "--tokens", "--json"],
    "eval": ["--checkpoint"],
    "audit": ["--max-tasks", "--json", "--no-cap"],
    "rollout": ["--split", "--num-tasks", "--checkpoint", "--out"],
    "index": ["--help-all"],
    "serve": ["--host", "--port"],
    "serve-env": ["--host", "--port", "--split", "--max-sessions"],
    "envs": ["--stats", "--config"],
    "compare": ["--allow-different-tasks", "--out"],
}
CONFIG_COMMANDS = ["train", "plan", "eval", "audit", "rollout", "index", "serve", "serve-env"]


def _help(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out = capsys.readouterr()
    assert stop.value.code == 0, out.err
    return out.out


@pytest.mark.parametrize("command", list(OWN_FLAGS))
def test_every_commands_help_lists_its_own_flags_first(capsys, command):
    out = _help(capsys, [command, "--help"])
    assert out.startswith(f"usage: lexrl {command}")
    for flag in OWN_FLAGS[command]:
        assert flag in out, flag
    if command in CONFIG_COMMANDS:
        # Its own options come before the config's keys.
        assert out.index(OWN_FLAGS[command][-1]) < out.index("config keys")


@pytest.mark.parametrize("command", CONFIG_COMMANDS)
def test_a_config_commands_help_fits_a_screen_and_says_where_the_rest_is(capsys, command):
    out = _help(capsys, [command, "--help"])
    # `plan` has eleven options of its own; the others fit 60 lines.
    assert len(out.splitlines()) <= (68 if command == "plan" else 60)
    assert "--help-all" in out and "lexrl config show SECTION" in out
    for section in SECTIONS:
        assert f"\n  {section}: " in out, section


def test_train_help_shows_the_most_used_keys_with_default_and_docstring(capsys):
    out = _help(capsys, ["train", "--help"])
    assert len(out.splitlines()) <= 60
    line = next(line for line in out.splitlines() if "--grpo.num_generations" in line)
    assert line.split()[:2] == ["--grpo.num_generations", "8"]
    assert "K: trajectories sampled per task" in line
    assert all(len(line) <= 100 for line in out.splitlines()[12:])


def test_the_help_is_the_same_with_a_config_file_given(capsys):
    assert _help(capsys, ["eval", "configs/demo_cpu.yaml", "-h"]) == _help(
        capsys, ["eval", "--help"]
    )


@pytest.mark.parametrize("command", ["train", "serve"])
def test_help_all_lists_every_key_with_its_docstring(capsys, command):
    out = _help(capsys, [command, "--help-all"])
    assert [name for name in option_names() if f"--{name} " not in out] == []
    assert "K: trajectories sampled per task" in out
    # Docstrings that hold `%`, which argparse would take for a format.
    assert "(processes % G == 0" in out and "for the 95%" in out


def test_envs_help_says_env_overrides_work_with_stats(capsys):
    out = _help(capsys, ["envs", "--help"])
    assert "--stats" in out and "--config" in out
    assert "`--env.*` overrides" in out and "lexrl envs statute --stats --env.dataset " in out


def test_config_show_prints_every_key_of_a_section_with_type_default_and_docstring(capsys):
    main(["config", "show", "grpo"])
    out = capsys.readouterr().out
    assert "--grpo.num_generations  int = 8\n    K: trajectories sampled per task" in out
    assert "--grpo.micro_batch_tokens  int | None = None" in out
    # The whole docstring, not its first line.
    assert "processes per task), with advantages over the whole group." in out


def test_config_show_alone_lists_the_sections(capsys):
    main(["config", "show"])
    out = capsys.readouterr().out
    for section in SECTIONS:
        assert f"\n  {section} " in out
    assert "env.lexam.judges" in out


def test_config_show_takes_nested_sections_and_list_entries():
    lexam = show_section("env.lexam")
    # An env's options are set as `--env.KEY` beside `--env.type lexam`.
    assert lexam.startswith("env.lexam: ") and "--env.judges  list[JudgeConfig] = []" in lexam
    judges = show_section("env.lexam.judges")
    assert "env.judges[].base_url  str = (required)" in judges


@pytest.mark.parametrize(
    ("section", "said"),
    [("grpoo", "did you mean grpo?"), ("grpo.loss", "`grpo.loss` is a key, not a section")],
)
def test_config_show_of_no_section_is_a_config_error(section, said):
    with pytest.raises(ConfigError, match=said):
        show_section(section)


def test_the_summary_tables_name_every_section_and_real_keys():
    names = [item.name for item in fields(Config)]
    assert list(SECTIONS) == names and list(MOST_USED) == names
    for section, keys in MOST_USED.items():
        section_keys = {item.name for item in fields(type(getattr(Config(), section)))}
        if section == "env":  # `env.type` picks the registered env whose options follow
            section_keys.add("type")
        assert set(keys) <= section_keys, section
    assert "env.statute.retrieval" in section_paths()


@pytest.mark.parametrize(
    ("docstring", "expected"),
    [
        (
            "K: per task (LegalMALR, sec. 3.3: K = 8). More.",
            "K: per task (LegalMALR, sec. 3.3: K = 8).",
        ),
        ("The endpoint, e.g. `http://h/v1`. A bare one.", "The endpoint, e.g. `http://h/v1`."),
        ("one two three four five six", "one two..."),
    ],
)
def test_first_sentence(docstring, expected):
    assert first_sentence(docstring, 14 if "six" in docstring else 100) == expected
