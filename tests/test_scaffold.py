"""`lexrl new-env`'s checks and what it writes (the written env is run end to end by
tests/test_contributing.py)."""

import json
import subprocess
import sys

import pytest

from lexrl.errors import ConfigError
from lexrl.scaffold import contract_tasks, write_env


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


def test_the_toy_data_is_balanced_and_split_by_parties():
    rows = contract_tasks()
    assert len({row["id"] for row in rows}) == len(rows) == 32
    for split in ("train", "test"):
        answers = [row["answer"] for row in rows if row["split"] == split]
        assert answers.count("yes") == answers.count("no") > 0
    test_sellers = {row["id"].split("-")[0] for row in rows if row["split"] == "test"}
    train_sellers = {row["id"].split("-")[0] for row in rows if row["split"] == "train"}
    assert test_sellers.isdisjoint(train_sellers)
    assert all(json.loads(json.dumps(row)) == row for row in rows)
