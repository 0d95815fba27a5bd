"""A lexrl bug ends in its traceback and one line saying where to report it: the address the
installed package declares, never one that is not the project's."""

import pytest

from lexrl import cli, errors


class Metadata:
    def __init__(self, urls):
        self.urls = urls

    def get_all(self, key):
        assert key == "Project-URL"
        return self.urls


def test_the_address_is_the_packages_own_issues_url_or_a_line_without_one(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(
        importlib.metadata,
        "metadata",
        lambda name: Metadata(["Homepage, https://example.org", "Issues, https://example.org/i"]),
    )
    assert errors.bug_report_address() == "at https://example.org/i"
    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: Metadata(None))
    assert "`pip show lexrl`" in errors.bug_report_address()


def test_an_unanticipated_exception_prints_its_traceback_and_where_to_report_it(
    monkeypatch, capsys
):
    def broken(argv):
        raise RuntimeError("an internal invariant broke")

    monkeypatch.setattr(cli, "_run", broken)
    with pytest.raises(SystemExit) as stop:
        cli.main(["envs"])
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "RuntimeError: an internal invariant broke" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("this is a lexrl bug, not an error in your input: please report it")
    assert "github.com/lexrl" not in err
