"""A plugin that cannot load costs one line and no command: whatever it does at import (raise,
call `sys.exit`, run `argparse` on lexrl's own command line, raise `KeyboardInterrupt`), a
malformed entry point, or an option named as one lexrl reserves (`type`, `name`, ...). The one
line names the env, its distribution and version, and what happened; `lexrl envs` exits 0 and
lists the other envs. A real Ctrl-C during a plugin's import still stops lexrl."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import ClassVar

import pytest

from lexrl.errors import ConfigError
from lexrl.options import AT_LEAST_0, Bound
from lexrl.registry import RESERVED_OPTION_NAMES, EnvConfig, discover_envs, register_env
from tests.e2e import lexrl_command
from tests.test_plugins import make_package, run

DIST = "lexrl-faulty-qa"


def faulty_plugin(site: Path, at_import: str = "", field: str = "", entry: str = "") -> None:
    """`make_package`'s plugin `faulty_qa` (distribution `DIST`) running `at_import` before its
    options module, with one more option `field` (source of a field line), or with the entry
    point value `entry`; and a sound plugin `echo_qa` beside it."""
    make_package(site, DIST, "faulty_qa", "faulty_qa")
    make_package(site, "lexrl-echo-qa", "echo_qa", "echo_qa")
    options = site / "faulty_qa" / "options.py"
    text = at_import + options.read_text()
    if field:
        text = text.replace("    credit: float = 1.0\n", f"    {field}\n    credit: float = 1.0\n")
    options.write_text(text)
    if entry:
        info = site / f"{DIST.replace('-', '_')}-0.1.0.dist-info" / "entry_points.txt"
        info.write_text(f"[lexrl.envs]\nfaulty_qa = {entry}\n")


FAULTS = {
    "sys.exit": (dict(at_import="import sys\nsys.exit(3)\n"), "called sys.exit(3) at import"),
    # A script's `argparse` run at import reads lexrl's own arguments, prints usage and exits 2.
    "argparse": (
        dict(at_import="import argparse\nargparse.ArgumentParser(prog='qa-tool').parse_args()\n"),
        "called sys.exit(2) at import; it printed 'usage: qa-tool [-h]'",
    ),
    "KeyboardInterrupt": (
        dict(at_import="raise KeyboardInterrupt\n"),
        "raised KeyboardInterrupt at import",
    ),
    "malformed entry point": (
        dict(entry="not a valid value!!"),
        "its entry point 'faulty_qa' is 'not a valid value!!', not `module:Class`",
    ),
    "entry point without module": (
        dict(entry=":EchoQaConfig"),
        "its entry point 'faulty_qa' is ':EchoQaConfig', not `module:Class`",
    ),
    "option named type": (
        dict(field='type: str = "open"'),
        "faulty_qa.options.EchoQaConfig has option 'type', a name reserved by lexrl",
    ),
    "option named name": (
        dict(field='name: str = "qa"'),
        "faulty_qa.options.EchoQaConfig has option 'name', a name reserved by lexrl",
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_plugin_that_cannot_load_costs_one_line_and_lexrl_envs_still_works(tmp_path, fault):
    plugin, said = FAULTS[fault]
    faulty_plugin(tmp_path, **plugin)
    listed = run(tmp_path, "envs")
    assert listed.returncode == 0, listed.stderr
    # The one line is all of stderr: no traceback, no usage, no "interrupted".
    lines = listed.stderr.splitlines()
    assert len(lines) == 1, listed.stderr
    assert lines[0].startswith(f"lexrl: env plugin 'faulty_qa' from {DIST} 0.1.0 failed to load")
    assert f"({said}" in lines[0] and lines[0].endswith("; the other envs are available")
    listed_names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert {"statute", "lexam", "echo_qa"} <= set(listed_names)
    # Asked for by name, it is refused with the same reason.
    config = tmp_path / "faulty.yaml"
    config.write_text("env:\n  type: faulty_qa\n")
    audited = run(tmp_path, "audit", str(config))
    assert audited.returncode == 2
    last = audited.stderr.strip().splitlines()[-1]
    assert "failed to load" in last and f"{DIST} 0.1.0" in last and said in last


def test_what_a_plugin_prints_while_it_loads_still_reaches_the_terminal(tmp_path):
    faulty_plugin(
        tmp_path,
        at_import="import sys\nprint('faulty_qa: warming up')\nprint('almost', file=sys.stderr)\n",
    )
    listed = run(tmp_path, "envs")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == "faulty_qa: warming up"
    assert listed.stderr == "almost\n"
    assert "faulty_qa" in [line.split()[0] for line in listed.stdout.splitlines()[1:]]


def test_a_real_ctrl_c_while_a_plugin_imports_stops_lexrl(tmp_path):
    started = tmp_path / "importing"
    faulty_plugin(
        tmp_path,
        at_import=f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n",
    )
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen(
        lexrl_command("envs"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        # Ctrl-C reaches it as in a terminal: a test run started in the background (as CI may
        # be) passes SIGINT on ignored, and a process started ignoring it keeps ignoring it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert started.exists(), process.communicate()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines() == ["interrupted (Ctrl-C)"]
    assert "statute" not in stdout


@pytest.fixture
def registry():
    """`EnvConfig`'s registry, restored after the test to what it held before."""
    known = EnvConfig.get_known_choices()
    before = dict(known)
    yield known
    known.clear()
    known.update(before)


@pytest.mark.parametrize("option", sorted(RESERVED_OPTION_NAMES))
def test_register_env_refuses_every_reserved_option_name(registry, option):
    cls = dataclasses.make_dataclass(
        "ClashingConfig",
        [(option, str, dataclasses.field(default="x"))],
        bases=(EnvConfig,),
        namespace={"__module__": "clashing_plugin.options"},
    )
    with pytest.raises(ConfigError) as refused:
        register_env("clashing")(cls)
    message = str(refused.value)
    assert "clashing_plugin.options.ClashingConfig" in message
    assert f"option {option!r}, a name reserved by lexrl" in message
    assert "\n" not in message
    assert "clashing" not in registry


def test_register_env_finds_a_reserved_option_on_either_side_of_dataclass(registry):
    @dataclasses.dataclass
    class Base(EnvConfig):
        type: str = "open"

    # Registered before `@dataclass` ran, and through a base class.
    with pytest.raises(ConfigError, match="option 'type', a name reserved by lexrl"):

        @dataclasses.dataclass
        @register_env("clashing")
        class Inheriting(Base):
            credit: float = 1.0

    assert "clashing" not in registry


def test_register_env_accepts_class_variables_of_reserved_names(registry):
    # This module's annotations are strings (`from __future__ import annotations`).
    @register_env("bounded")
    @dataclasses.dataclass
    class Bounded(EnvConfig):
        credit: float = 1.0
        BOUNDS: ClassVar[dict[str, Bound]] = {"credit": AT_LEAST_0}

    assert registry["bounded"] is Bounded and Bounded().name == "bounded"


def test_no_built_in_env_takes_a_reserved_option_name():
    envs = discover_envs()
    assert {"statute", "lexam", "argument", "debate", "gdpr", "mix"} <= set(envs)
    for name, cls in envs.items():
        options = {field.name for field in dataclasses.fields(cls)}
        assert not options & RESERVED_OPTION_NAMES, name
