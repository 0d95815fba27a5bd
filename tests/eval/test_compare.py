"""`lexrl compare`: two reports side by side, differences and interval overlap, on hand-made
reports of a single env and of a mixture."""

import json

import pytest

from lexrl.cli import main
from lexrl.eval.compare import compare_markdown, find_report, overlap, report_sections


def _single(mean, low, high):
    return {
        "summary": {"episodes": 10.0, "accuracy": mean},
        "intervals": {"accuracy": {"mean": mean, "low": low, "high": high}},
    }


def _mixture(gdpr, statute=None):
    envs = {"gdpr": {"tasks": 10, **_single(*gdpr)}}
    if statute is not None:
        envs["statute"] = {"tasks": 5, **_single(*statute)}
    return {"envs": envs}


def test_overlap_by_hand():
    a = {"mean": 0.5, "low": 0.4, "high": 0.6}
    assert overlap(a, {"mean": 0.65, "low": 0.55, "high": 0.75}) is True
    assert overlap(a, {"mean": 0.8, "low": 0.7, "high": 0.9}) is False
    assert overlap(a, {"mean": 0.6, "low": 0.6, "high": 0.6}) is None


def test_sections_of_a_single_env_and_of_a_mixture():
    single = report_sections(_single(0.5, 0.4, 0.6))
    assert list(single) == [""]
    assert single[""]["episodes"] == {"mean": 10.0, "low": 10.0, "high": 10.0}
    mixed = report_sections(_mixture((0.5, 0.4, 0.6), (0.2, 0.1, 0.3)))
    assert list(mixed) == ["gdpr", "statute"]
    with pytest.raises(ValueError, match="no episode means"):
        report_sections({"env": {}})


def test_the_table_gives_differences_and_overlap():
    markdown = compare_markdown(
        _mixture((0.5, 0.4, 0.6), (0.2, 0.1, 0.3)),
        _mixture((0.8, 0.7, 0.9)),
        "before",
        "after",
    )
    gdpr = markdown[markdown.index("## gdpr") : markdown.index("## statute")]
    assert "| accuracy | 0.5000 [0.400, 0.600] | 0.8000 [0.700, 0.900] | +0.3000 | **no** |" in gdpr
    assert "| episodes | 10.0000 | 10.0000 | +0.0000 | - |" in gdpr
    statute = markdown[markdown.index("## statute") :]
    assert "| accuracy | 0.2000 [0.100, 0.300] | - | - | - |" in statute


def test_the_command_reads_folders_and_names_bad_input(tmp_path, capsys):
    for name, report in (("a", _single(0.5, 0.4, 0.6)), ("b", _single(0.55, 0.45, 0.65))):
        folder = tmp_path / name / "eval" / "base_test_1234"
        folder.mkdir(parents=True)
        (folder / "eval_test_report.json").write_text(json.dumps(report))
    out = tmp_path / "compare.md"
    main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)])
    printed = capsys.readouterr().out
    assert "| accuracy | 0.5000 [0.400, 0.600] | 0.5500 [0.450, 0.650] | +0.0500 | yes |" in printed
    assert out.read_text() in printed

    (tmp_path / "a" / "eval" / "other").mkdir()
    (tmp_path / "a" / "eval" / "other" / "eval_test_report.json").write_text("{")
    with pytest.raises(ValueError, match="holds 2 reports"):
        find_report(tmp_path / "a")
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(tmp_path / "a" / "eval" / "other"), str(tmp_path / "b")])
    assert stop.value.code == 2
    assert "not a JSON report" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no eval_<split>_report.json"):
        find_report(tmp_path / "empty")
