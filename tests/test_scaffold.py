"""`lexrl new-env`'s checks and what it writes (the written env is run end to end by
tests/test_contributing.py)."""

import errno
import importlib.metadata
import json
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lexrl.envs.base import Env
from lexrl.errors import ConfigError
from lexrl.policy import Policy
from lexrl.scaffold import DEFAULT_ROLES, MAX_NAME_LENGTH, SPLITS, contract_tasks, write_env
from lexrl.types import Task, Trajectory
from tests.e2e import lexrl_command


@pytest.mark.parametrize("name", ["Court", "1fees", "court-fees", "class", ""])
def test_a_name_that_is_no_package_name_is_refused(tmp_path, name):
    with pytest.raises(ConfigError, match="lower-case letters"):
        write_env(name, ("answerer",), tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_name_an_installed_env_holds_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="taken by an installed env"):
        write_env("statute", ("answerer",), tmp_path)


def test_an_existing_folder_is_left_alone(tmp_path):
    (tmp_path / "fees").mkdir()
    (tmp_path / "fees" / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="exists"):
        write_env("fees", ("answerer",), tmp_path)
    assert [p.name for p in (tmp_path / "fees").iterdir()] == ["mine.txt"]


@pytest.mark.parametrize("name", ["pytest", "pluggy", "lexrl", "torch", "datasets"])
def test_the_name_of_an_installed_distribution_is_refused(tmp_path, name):
    # `pip install -e ./NAME` would uninstall it for the scaffold.
    version = importlib.metadata.version(name)
    with pytest.raises(ConfigError, match=f"installed distribution {name} {re.escape(version)}:"):
        write_env(name, ("answerer",), tmp_path)
    assert not any(tmp_path.iterdir())


def test_distribution_names_are_compared_as_pip_compares_them(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "Lexrl.Probe_Dist-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: Lexrl.Probe_Dist\nVersion: 1.2.3\n"
    )
    monkeypatch.syspath_prepend(site)
    parent = tmp_path / "envs"
    match = "distribution Lexrl.Probe_Dist 1.2.3: pip install -e would replace it"
    with pytest.raises(ConfigError, match=match):
        write_env("lexrl_probe_dist", ("answerer",), parent)
    assert not parent.exists()


@pytest.mark.parametrize("name", ["json", "os", "tomllib"])
def test_the_name_of_a_standard_library_module_is_refused(tmp_path, name):
    with pytest.raises(ConfigError, match=f"standard library's module {name}: .*nothing was"):
        write_env(name, ("answerer",), tmp_path)
    assert not any(tmp_path.iterdir())


def test_the_name_of_an_importable_module_is_refused(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "lexrl_probe_module.py").write_text("")
    monkeypatch.syspath_prepend(site)
    with pytest.raises(ConfigError, match="importable module lexrl_probe_module .*probe_module.py"):
        write_env("lexrl_probe_module", ("answerer",), tmp_path / "envs")
    assert not (tmp_path / "envs").exists()


def test_a_name_longer_than_the_maximum_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=f"has {MAX_NAME_LENGTH + 1} characters: use at most"):
        write_env("a" * (MAX_NAME_LENGTH + 1), ("answerer",), tmp_path)
    assert not any(tmp_path.iterdir())
    root = write_env("a" * MAX_NAME_LENGTH, ("answerer",), tmp_path)
    assert (root / "configs" / f"{'a' * MAX_NAME_LENGTH}_cpu.yaml").is_file()


@pytest.mark.parametrize("under", ["", "x/y"])
def test_a_file_as_dir_or_above_it_is_refused_by_name(tmp_path, under):
    (tmp_path / "notes.txt").write_text("keep")
    parent = tmp_path / "notes.txt" / under
    with pytest.raises(ConfigError, match=f"--dir {re.escape(str(parent))} .*a file, not a folder"):
        write_env("fees", ("answerer",), parent)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "keep"


def test_a_missing_dir_is_created(tmp_path):
    root = write_env("fees", ("answerer",), tmp_path / "a" / "b")
    assert root == tmp_path / "a" / "b" / "fees" and (root / "pyproject.toml").is_file()


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left"), KeyboardInterrupt()])
def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch, failure):
    write_text, written = Path.write_text, []

    def fail_on_the_third(path, *args, **kwargs):
        written.append(path)
        if len(written) == 3:
            raise failure
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", fail_on_the_third)
    expected = ConfigError if isinstance(failure, OSError) else KeyboardInterrupt
    with pytest.raises(expected) as raised:
        write_env("fees", ("answerer",), tmp_path / "a" / "b")
    if expected is ConfigError:
        message = str(raised.value)
        assert "No space left; nothing was left behind" in message and "\n" not in message
    # The written files, the staging folder and the `--dir` folders made for them are gone.
    assert len(written) == 3 and not any(tmp_path.iterdir())


def test_an_abandoned_staging_folder_blocks_nothing(tmp_path):
    abandoned = tmp_path / ".fees.partial-killed"
    (abandoned / "fees").mkdir(parents=True)
    (abandoned / "pyproject.toml").write_text("[project]\n")
    root = write_env("fees", ("answerer",), tmp_path)
    assert len((root / "fees" / "data" / "tasks.jsonl").read_text().splitlines()) == sum(
        SPLITS.values()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [".fees.partial-killed", "fees"]
    # Staged, the package still has the mode any new folder gets here (mkdtemp's is 0700).
    (tmp_path / "probe").mkdir()
    assert root.stat().st_mode == (tmp_path / "probe").stat().st_mode


def limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
    # Ignored, SIGXFSZ no longer kills the writer: the write fails with EFBIG instead.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_the_cli_under_a_file_size_limit_leaves_nothing_and_then_succeeds(tmp_path):
    command = lexrl_command("new-env", "fees", "--dir", "envs")
    limited = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size,
    )
    assert limited.returncode == 2, limited.stderr
    assert limited.stderr.startswith("config error: cannot write ")
    assert "File too large; nothing was left behind" in limited.stderr
    assert limited.stderr.count("\n") == 1 and "Traceback" not in limited.stderr
    assert not any(tmp_path.iterdir())
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert [p.name for p in (tmp_path / "envs").iterdir()] == ["fees"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pytest"], "env name 'pytest' is the name of the installed distribution pytest"),
        (["json"], "env name 'json' is the name of the standard library's module json"),
        (["a" * 300], f"has 300 characters: use at most {MAX_NAME_LENGTH}"),
        (["fees", "--dir", "notes.txt"], "--dir notes.txt is a file, not a folder"),
    ],
    ids=["distribution", "stdlib", "300 characters", "file as dir"],
)
def test_the_cli_refuses_in_one_line(tmp_path, args, message):
    (tmp_path / "notes.txt").write_text("keep")
    result = subprocess.run(
        lexrl_command("new-env", *args), cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stderr.startswith("config error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("roles", [(), ("clerk", "clerk"), ("Clerk",)])
def test_roles_must_be_distinct_names(tmp_path, roles):
    with pytest.raises(ConfigError, match="role"):
        write_env("fees", roles, tmp_path)


def test_it_writes_one_prompt_per_role_and_an_entry_point(tmp_path):
    root = write_env("fees", ("clerk", "reviewer", "judge"), tmp_path)
    prompts = sorted(p.stem for p in (root / "fees" / "prompts").iterdir())
    assert prompts == ["clerk", "judge", "reviewer"]
    assert 'fees = "fees.options:FeesEnvConfig"' in (root / "pyproject.toml").read_text()
    assert "Answer: yes" in (root / "fees" / "prompts" / "judge.txt").read_text()
    assert "Answer: yes" not in (root / "fees" / "prompts" / "clerk.txt").read_text()
    for path in root.rglob("*.py"):
        compiled = subprocess.run([sys.executable, "-m", "py_compile", str(path)])
        assert compiled.returncode == 0, path


def test_the_toy_data_is_balanced_held_out_and_follows_its_rule():
    rows = contract_tasks()
    assert len({row["id"] for row in rows}) == len(rows)
    for split, count in SPLITS.items():
        answers = [row["answer"] for row in rows if row["split"] == split]
        assert len(answers) == count and answers.count("yes") == answers.count("no")
        # Shuffled: the task half the split away (the `other_task_teacher` probe's) is no guide.
        same = sum(answer == answers[(i + count // 2) % count] for i, answer in enumerate(answers))
        assert same <= 0.6 * count
    assert SPLITS["test"] >= 40  # a paired verdict's interval needs them (docs/contributing.md)
    train = {row["question"] for row in rows if row["split"] == "train"}
    assert not any(row["question"] in train for row in rows if row["split"] == "test")
    for row in rows:
        # The answer is read off the question: a contract exactly when no element is missing.
        missing = any(phrase in row["question"] for phrase in MISSING)
        assert row["answer"] == ("no" if missing else "yes")
        assert ("no." in row["rationale"]) == missing
    assert all(json.loads(json.dumps(row)) == row for row in rows)


MISSING = ("might be for sale", "did not reply", "pay nothing")


@pytest.mark.parametrize(
    ("name", "roles"), [("fees", ("clerk", "judge")), ("a_long_contract_formation_env", ("j",))]
)
def test_it_writes_a_gitignore_and_files_ruff_leaves_alone(tmp_path, name, roles):
    root = write_env(name, roles, tmp_path)
    assert {"runs/", ".lexrl_cache/", "build/", "*.egg-info/"} <= set(
        (root / ".gitignore").read_text().splitlines()
    )
    for check in (["check"], ["format", "--check"]):
        # The package's own pyproject.toml holds its ruff settings.
        ruff = subprocess.run(
            [sys.executable, "-m", "ruff", *check, "--no-cache", "."],
            cwd=root,
            capture_output=True,
            text=True,
        )
        assert ruff.returncode == 0, ruff.stdout + ruff.stderr


class Loader(Env):
    """An env whose test split cannot be loaded."""

    name, roles = "loader", ("clerk",)

    def tasks(self, split: str) -> list[Task]:
        if split != "train":
            raise FileNotFoundError(f"no file for {split}")
        return [Task("a", {"question": "abc"}, "yes"), Task("b", {"question": "abcde"}, "no")]

    async def run_episode(self, task: Task, policy: Policy) -> Trajectory:
        raise NotImplementedError


def test_the_default_stats_count_tasks_and_survive_a_loader_that_raises():
    stats = Loader().stats()
    assert stats["roles"] == ["clerk"]
    assert stats["train"] == {"tasks": 2, "input_chars": {"min": 3, "mean": 4.0, "max": 5}}
    assert stats["test"] == {"error": "FileNotFoundError: no file for test"}
    assert "validation" not in stats and "dev" not in stats


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """`lexrl new-env demoqa`, installed as `pip install` would but into a folder of the test's
    (its metadata, hence its entry point, found on PYTHONPATH), and the environment to run it."""
    base = tmp_path_factory.mktemp("scaffold")
    root, site = write_env("demoqa", DEFAULT_ROLES, base), base / "site"
    target = ["--no-deps", "--no-build-isolation", "--target", str(site)]
    pip = [sys.executable, "-m", "pip", "install", "-q", *target, str(root)]
    subprocess.run(pip, check=True, capture_output=True)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    return root, env


def lexrl(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "lexrl.cli", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_envs_stats_of_a_plugin_is_a_table(installed):
    root, env = installed
    result = lexrl(["envs", "demoqa", "--stats"], root, env)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| demoqa |")]
    assert "| demoqa | roles | " + ", ".join(DEFAULT_ROLES) + " |" in rows
    assert f"| demoqa | test.tasks | {SPLITS['test']} |" in rows


def test_envs_stats_of_a_plugin_as_json(installed):
    root, env = installed
    result = lexrl(["envs", "demoqa", "--stats", "--json"], root, env)
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads(result.stdout)
    assert stats["roles"] == list(DEFAULT_ROLES)
    assert stats["train"]["tasks"] == SPLITS["train"] and stats["test"]["tasks"] == SPLITS["test"]
    assert 0 < stats["test"]["input_chars"]["min"] <= stats["test"]["input_chars"]["max"]


def test_envs_stats_without_a_name_covers_every_env(installed):
    root, env = installed
    result = lexrl(["envs", "--stats", "--json"], root, env)
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads(result.stdout)
    assert {"demoqa", "statute", "lexam", "argument"} <= set(stats)
    assert stats["demoqa"]["test"]["tasks"] == SPLITS["test"]
    # The mixture's defaults name no members: its error is shown and the others still print.
    assert "env.members" in stats["mix"]["error"] and "mix: not loaded" in result.stderr


@pytest.mark.slow
def test_the_scaffold_default_config_beats_each_degenerate_policy(installed):
    """`lexrl train configs/demoqa_cpu.yaml` as the scaffold prints it: after the warm-start and
    GRPO, the held-out comparison with the degenerate policies (every one the env and lexrl
    play: the scaffold's constants and lexrl's generic probes) is won, paired, on reward and on
    accuracy."""
    root, env = installed
    result = lexrl(["train", "configs/demoqa_cpu.yaml"], root, env)
    assert result.returncode == 0, result.stderr[-3000:]
    out = root / "runs" / "demoqa_cpu"
    rows = json.loads((out / "eval_vs_degenerate.json").read_text())
    assert {row["measure"] for row in rows} == {"reward", "accuracy"}
    for row in rows:
        assert {"empty", "always_yes", "always_no"} <= {each["policy"] for each in row["each"]}
        lost = [each["policy"] for each in row["each"] if each["verdict"] != "yes"]
        assert row["verdict"] == "yes" and not lost, (row["measure"], lost)
    assert "| yes |" in (out / "eval_vs_degenerate.md").read_text()


def test_the_scaffolds_own_tests_check_the_env_contract(installed):
    root, env = installed
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-k", "contract"]
    result = subprocess.run(
        [*argv, "tests"], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert "2 passed" in result.stdout


def test_an_env_with_no_training_tasks_is_one_data_error_before_any_model(installed, tmp_path):
    root, env = installed
    tasks = tmp_path / "test_only.jsonl"
    row = {"id": "t1", "split": "test", "question": "q", "rationale": "r", "answer": "yes"}
    tasks.write_text(json.dumps(row) + "\n")
    result = lexrl(
        [
            "train",
            "configs/demoqa_cpu.yaml",
            "--env.tasks_path",
            str(tasks),
            "--run.output_dir",
            str(tmp_path / "run"),
        ],
        root,
        env,
    )
    assert result.returncode == 3, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("data error:")
    assert "train" in result.stderr and "Traceback" not in result.stderr
    assert "Loading weights" not in result.stderr  # refused before the model was built
