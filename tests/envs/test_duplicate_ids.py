"""Dataset files fail loudly and in one line: a repeated id names both of its lines, a file
without queries names the file, and a missing local path is never looked up on the Hub."""

import json
from pathlib import Path

import datasets
import pytest

from lexrl.envs.argument.scenarios import TABLE_1, load_scenarios, scenario_to_json
from lexrl.envs.data import check_unique, read_jsonl
from lexrl.envs.debate.data import barexam_tasks
from lexrl.envs.lexam.data import load_lexam
from lexrl.envs.statute.data import load_csaid, load_jsonl, load_stard
from lexrl.envs.statute.env import StatuteEnv
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.errors import DatasetError, ScenarioError

ARTICLE = {"name": "A", "content": "security deposit"}


def _lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def _statute_files(tmp_path: Path, corpus: list[dict], train: list[dict], test: list[dict]) -> str:
    _lines(tmp_path / "corpus.jsonl", corpus)
    _lines(tmp_path / "train.jsonl", train)
    _lines(tmp_path / "test.jsonl", test)
    return str(tmp_path / "{split}.jsonl")


QUERY = {"id": "a", "query": "deposit back?", "gold": [1]}


def test_a_repeated_corpus_id_names_both_lines(tmp_path):
    corpus = [{"id": 1, **ARTICLE}, {"id": 2, **ARTICLE}, {"id": 1, **ARTICLE}]
    queries = _statute_files(tmp_path, corpus, [QUERY], [QUERY])
    config = StatuteEnvConfig(
        dataset="jsonl", corpus_path=str(tmp_path / "corpus.jsonl"), queries_path=queries
    )
    first, second = f"{tmp_path / 'corpus.jsonl'}:1", f"{tmp_path / 'corpus.jsonl'}:3"
    with pytest.raises(DatasetError) as error:
        StatuteEnv.from_config(config)
    assert str(error.value) == f"{second}: id 1 repeats {first}"


def test_a_repeated_query_id_names_both_lines_counting_blank_ones(tmp_path):
    queries = _statute_files(tmp_path, [{"id": 1, **ARTICLE}], [QUERY], [QUERY])
    (tmp_path / "train.jsonl").write_text(json.dumps(QUERY) + "\n\n" + json.dumps(QUERY) + "\n")
    with pytest.raises(DatasetError, match=r"train\.jsonl:3: id 'a' repeats .*train\.jsonl:1$"):
        load_jsonl(tmp_path / "corpus.jsonl", queries)


def test_an_empty_query_file_is_named(tmp_path):
    queries = _statute_files(tmp_path, [{"id": 1, **ARTICLE}], [QUERY], [])
    with pytest.raises(DatasetError, match=rf"^no queries in {tmp_path / 'test.jsonl'}$"):
        load_jsonl(tmp_path / "corpus.jsonl", queries)
    _lines(tmp_path / "test.jsonl", [QUERY])
    _lines(tmp_path / "corpus.jsonl", [])
    with pytest.raises(DatasetError, match=r"^no articles in .*corpus\.jsonl$"):
        load_jsonl(tmp_path / "corpus.jsonl", queries)


STARD_QUERY = {
    "query_id": 1,
    "问题": "欠债不还怎么办",
    "相关法规": {"民法典第一条": "债务应当清偿。"},
    "match_id": [7],
    "match_name": ["民法典第一条"],
}


def _stard(tmp_path: Path, queries: list[dict], split: dict) -> tuple[Path, Path]:
    (tmp_path / "q.json").write_text(json.dumps(queries, ensure_ascii=False))
    (tmp_path / "s.json").write_text(json.dumps(split))
    return tmp_path / "q.json", tmp_path / "s.json"


def test_stard_repeats_and_an_empty_queries_file(tmp_path):
    queries, split = _stard(tmp_path, [STARD_QUERY, STARD_QUERY], {"train": [1], "test": [1]})
    with pytest.raises(
        DatasetError, match=r"q\.json query #1: query_id 1 repeats .*q\.json query #0"
    ):
        load_stard(queries, split)
    queries, split = _stard(tmp_path, [STARD_QUERY], {"train": [1], "test": [1, 1]})
    with pytest.raises(DatasetError, match=r"s\.json `test` item 1: id 1 repeats .*`test` item 0"):
        load_stard(queries, split)
    queries, split = _stard(tmp_path, [STARD_QUERY], {"train": [1], "test": [1]})
    corpus = _lines(tmp_path / "corpus.jsonl", [{"id": 7, **ARTICLE}, {"id": 7, **ARTICLE}])
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: id 7 repeats .*corpus\.jsonl:1"):
        load_stard(queries, split, corpus)
    queries, split = _stard(tmp_path, [], {"train": [], "test": []})
    with pytest.raises(DatasetError, match=rf"^no queries in {queries}$"):
        load_stard(queries, split)


def test_csaid_repeated_query_key_and_an_empty_queries_file(tmp_path):
    entry = '{"query": "q", "label": ["a"]}'
    (tmp_path / "q.json").write_text(f'{{"1": {entry},\n "1": {entry}}}')
    with pytest.raises(DatasetError, match=r"q\.json: key '1' appears twice"):
        load_csaid(tmp_path / "q.json", allow_unmatched=True)
    (tmp_path / "q.json").write_text("{}")
    with pytest.raises(DatasetError, match=r"^no queries in .*q\.json$"):
        load_csaid(tmp_path / "q.json")


def test_the_shared_helpers(tmp_path):
    check_unique([("a", "x:1"), ("b", "x:2")])
    with pytest.raises(DatasetError, match=r"^y row 3: case 'a' repeats x:1$"):
        check_unique([("a", "x:1"), ("a", "y row 3")], "case")
    path = _lines(tmp_path / "lists.jsonl", [{"id": [1, 2]}, {"id": [1, 2]}])
    with pytest.raises(DatasetError, match=r"lists\.jsonl:2: id"):
        list(read_jsonl(path, unique="id"))


def test_a_scenario_id_used_twice_names_the_first_line(tmp_path):
    line = json.loads(scenario_to_json(TABLE_1))
    path = _lines(tmp_path / "s.jsonl", [line, line])
    with pytest.raises(ScenarioError, match=r"s\.jsonl:2: `id` .* already used on .*s\.jsonl:1$"):
        load_scenarios(path)


@pytest.fixture()
def no_hub(monkeypatch):
    """Fails a test that reaches the Hub; `missing` makes the Hub answer that it has no such
    dataset instead."""
    calls = []

    def load_dataset(source, *args, **kwargs):
        calls.append(source)
        raise datasets.exceptions.DatasetNotFoundError(f"Dataset '{source}' doesn't exist")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


@pytest.mark.parametrize("where", ["absolute", "./relative", "~/home", "deep/er/path", "x.jsonl"])
def test_a_missing_local_lexam_path_is_not_looked_up_on_the_hub(tmp_path, no_hub, where):
    source = {"absolute": str(tmp_path / "lexam_mcq")}.get(where, where)
    with pytest.raises(DatasetError, match="dataset file not found") as error:
        load_lexam(source, "mcq_4_choices")
    assert source in str(error.value) and ".parquet, .jsonl" in str(error.value)
    assert no_hub == []


def test_a_local_file_without_a_known_format_names_the_formats(tmp_path, no_hub):
    path = tmp_path / "mcq4"
    path.write_text('{"id": "q0"}\n')
    with pytest.raises(DatasetError, match=rf"{path}: unsupported format; one of .parquet"):
        load_lexam(str(path), "mcq_4_choices")
    assert no_hub == []


def test_a_hub_id_the_hub_lacks_names_both_readings(no_hub):
    with pytest.raises(DatasetError, match=r"^data/lexam: no local file or folder .* no Hub"):
        load_lexam("data/lexam", "mcq_4_choices")
    with pytest.raises(DatasetError, match="no local file or folder"):
        barexam_tasks("someone/barexam", 0.2, 0)
    assert no_hub == ["data/lexam", "someone/barexam"]
