"""`lexrl compare` refuses, in one line naming both, reports of different envs or splits."""

import json
import re

import pytest

from lexrl.cli import main


def _report(tmp_path, name, env_name, split="test"):
    report = {"split": split, "system": "base", "summary": {"episodes": 4.0, "reward": 0.5}}
    if env_name is not None:
        report["env_name"] = env_name
    path = tmp_path / name / f"eval_{split}_report.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(report))
    return path


@pytest.mark.parametrize(
    ("a", "b", "said"),
    [
        (("statute", "test"), ("lexam", "test"), "env statute on split test, .* env lexam"),
        (("lexam", "dev"), ("lexam", "test"), "env lexam on split dev, .* env lexam on split test"),
        ((None, "dev"), ("lexam", "test"), r"env \? on split dev, .* env lexam on split test"),
    ],
)
def test_reports_of_other_envs_or_splits_are_refused(tmp_path, capsys, a, b, said):
    path_a, path_b = _report(tmp_path, "a", *a), _report(tmp_path, "b", *b)
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(path_a), str(path_b)])
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"config error: {path_a} evaluates ")
    assert str(path_b) in line and "compare reports of the same env and split" in line
    assert re.search(said, line)


def test_reports_of_one_env_and_split_compare(tmp_path, capsys):
    # A report from before reports named their env is compared on its split.
    path_a, path_b = _report(tmp_path, "a", "lexam"), _report(tmp_path, "b", None)
    main(["compare", str(path_a), str(path_b)])
    assert "| reward | 0.5000 | 0.5000 | +0.0000 | - |" in capsys.readouterr().out


def test_a_leaderboard_refuses_a_report_of_another_env(tmp_path, capsys):
    paths = [_report(tmp_path, name, env) for name, env in (("a", "lexam"), ("b", "lexam"))]
    other = _report(tmp_path, "c", "statute")
    with pytest.raises(SystemExit) as stop:
        main(["compare", *map(str, paths), str(other)])
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"config error: {paths[0]} evaluates env lexam") and str(other) in line
