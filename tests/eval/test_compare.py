"""`lexrl compare`: two reports side by side, differences and interval overlap, on hand-made
reports of a single env and of a mixture."""

import json

import pytest

from lexrl.cli import main
from lexrl.errors import ReportError
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
    assert stop.value.code == 3
    assert capsys.readouterr().err.startswith("data error: ")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no eval_<split>_report.json"):
        find_report(tmp_path / "empty")


def _compare_fails(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        main(["compare", *argv])
    (line,) = capsys.readouterr().err.strip().splitlines()
    return stop.value.code, line


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[1, 2]", "not an evaluation report (a JSON list, not an object"),
        ('{"summary": [0.5]}', "`summary` is [0.5], not an object"),
        ('{"summary": {"accuracy": "high"}}', '`summary.accuracy` is "high", not a number'),
        ('{"summary": {"accuracy": true}}', "`summary.accuracy` is true, not a number"),
        ('{"summary": {"a": 1}, "intervals": {"a": {"mean": 1}}}', "`intervals.a` lacks low, high"),
        ('{"envs": {"gdpr": {"summary": {"a": null}}}}', "`envs.gdpr.summary.a` is null, not a"),
        ('{"summary": {"a": 1' + "0" * 400 + "}}", "`summary.a` is too large for a float"),
        ('{"summary": {"a": 1' + "0" * 5000 + "}}", "not a JSON report (Exceeds the limit"),
        ('{"summary": \xff}', "not a JSON report (not UTF-8"),
    ],
    ids=[
        "list",
        "summary_list",
        "text_metric",
        "bool_metric",
        "interval_without_bounds",
        "null_in_env",
        "huge_int",
        "too_long_int",
        "not_utf8",
    ],
)
def test_a_malformed_report_is_a_data_error_naming_the_file_and_key(
    tmp_path, capsys, content, said
):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_single(0.5, 0.4, 0.6)))
    bad = tmp_path / "bad.json"
    bad.write_bytes(content.encode("latin-1"))
    code, line = _compare_fails(capsys, str(good), str(bad))
    assert code == 3
    assert line.startswith(f"data error: {bad}") and said in line, line


def test_out_into_a_missing_folder_creates_it(tmp_path, capsys):
    report = tmp_path / "r.json"
    report.write_text(json.dumps(_single(0.5, 0.4, 0.6)))
    out = tmp_path / "new" / "deeper" / "compare.md"
    main(["compare", str(report), str(report), "--out", str(out)])
    printed = capsys.readouterr().out
    assert out.read_text() in printed
    assert f"Note: A and B are the same report ({report}); there is nothing to compare." in printed
    (tmp_path / "file").write_text("")
    code, line = _compare_fails(
        capsys, str(report), str(report), "--out", str(tmp_path / "file" / "x.md")
    )
    assert code == 2 and line.startswith(f"config error: --out {tmp_path / 'file' / 'x.md'}: ")


def test_compare_errors_are_one_line_of_their_kind(tmp_path, capsys):
    report = tmp_path / "r.json"
    report.write_text(json.dumps(_single(0.5, 0.4, 0.6)))
    assert _compare_fails(capsys, str(report), str(tmp_path / "missing")) == (
        3,
        f"data error: {tmp_path / 'missing'}: no such report file or folder",
    )
    code, line = _compare_fails(capsys, str(report), str(report), "--bootstrap", "9")
    assert code == 2 and line.startswith("config error: compare: unknown argument(s) --bootstrap 9")
