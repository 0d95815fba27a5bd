"""Fuzzing the config layer: any YAML document, any file bytes and any command-line overrides
either load into a Config that validates and survives a save and reload, or raise a
`ConfigError` (one `config error` line), never another exception or argparse's exit.

Keys are mostly real options (so values reach draccus' decoding and `validate`), values any
YAML value. The examples are derandomized, so CI sees the same ones on every run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lexrl.config import ConfigError, load_config, option_names, save_config

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(autouse=True)
def forget_key_variables(monkeypatch):
    """`validate` remembers each `api_key_env` it meets, to mask its value in every output: a
    fuzzed name (`_`, `HOME`) must not go on masking the rest of the session's output."""
    from lexrl import secrets

    monkeypatch.setattr(secrets, "_secret_variables", set(secrets._secret_variables))


OPTIONS = option_names()
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=16)
    | st.sampled_from(["-1", "1e400", ".nan", "statute", "mix", "http://h/v1", "{split}", "~"])
)
YAML_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)
RARELY = st.sampled_from([False] * 7 + [True])
KEYS = RARELY.flatmap(lambda other: st.text(max_size=12) if other else st.sampled_from(OPTIONS))
"""A real option seven times in eight, so that most values reach draccus and `validate`."""


def nested(settings_: dict[str, object]) -> dict:
    """The YAML mapping of dotted keys (`grpo.loss`); a key under a value that is no mapping
    replaces it."""
    document: dict = {}
    for dotted, value in settings_.items():
        *sections, leaf = dotted.split(".")
        node = document
        for section in sections:
            if not isinstance(node.get(section), dict):
                node[section] = {}
            node = node[section]
        node[leaf] = value
    return document


def check_loads(folder: Path, path: Path | None, overrides: list[str] = ()) -> None:
    """The config loads or is a ConfigError; one that loads saves and reloads to the same
    values (what a resumed `lexrl train` does with `<run>/config.yaml`)."""
    try:
        config = load_config(path, list(overrides))
    except ConfigError:
        return
    saved = folder / "saved.yaml"
    save_config(config, saved)
    assert load_config(saved) == config


@FUZZ
@given(st.dictionaries(KEYS, YAML_VALUES, max_size=4))
def test_any_yaml_document_loads_or_is_a_config_error(tmp_path, settings_):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(nested(settings_)), encoding="utf-8")
    check_loads(tmp_path, path)


@FUZZ
@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_any_file_loads_or_is_a_config_error(tmp_path, data):
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    check_loads(tmp_path, path)


def override(name: str, value: object) -> list[str]:
    text = value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True)
    return [f"--{name}", text.removesuffix("\n...\n").strip()]


@FUZZ
@given(
    st.lists(
        RARELY.flatmap(
            lambda stray: (
                # `-h` prints the help and exits 0: no error.
                st.lists(st.text(max_size=10).filter(lambda t: t not in ("-h", "--help")))
                if stray
                else st.tuples(KEYS, YAML_VALUES).map(lambda pair: override(*pair))
            )
        ),
        max_size=4,
    )
)
# Found by this test: argparse's exit with draccus' usage for an option without its value or a
# stray word, and YAML's reader refusing a control character outside draccus' errors.
@example(tokens=[["--grpo.loss"]])
@example(tokens=[["stray"]])
@example(tokens=[["--model.name_or_path", "\x08"]])
def test_any_overrides_load_or_are_a_config_error(tmp_path, tokens):
    check_loads(tmp_path, None, [token for group in tokens for token in group])
