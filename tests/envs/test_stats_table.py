"""`lexrl envs --stats` as a table: a row per number, keyed by its dotted path."""

from lexrl.envs.stats_table import flat_rows, markdown


def test_nested_statistics_become_dotted_rows():
    stats = {"roles": ["a", "b"], "test": {"tasks": 48, "chars": {"mean": 140.25}}}
    assert list(flat_rows(stats)) == [
        ("roles", "a, b"),
        ("test.tasks", "48"),
        ("test.chars.mean", "140.250"),
    ]


def test_a_list_of_objects_is_numbered_and_a_bar_cannot_break_the_table():
    rows = list(flat_rows({"files": [{"name": "x|y"}, {"name": "z"}]}))
    assert rows == [("files.0.name", "x|y"), ("files.1.name", "z")]
    table = markdown({"env": {"note": "a|b"}}).splitlines()
    assert table[2] == "| env | note | a\\|b |"
