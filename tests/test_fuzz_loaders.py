"""Fuzzing every dataset loader with files of arbitrary JSON lines and bytes: each load either
succeeds, with the types the envs rely on, or raises a `LexrlError` (a one-line `data error`),
never another exception (a lexrl bug and its traceback).

A file holds records with the loader's keys and plausible values, rarely a key left out or
holding any JSON, a line of other JSON or text, a few arbitrary bytes inserted (not UTF-8, a
NUL, a cut character): mostly whole files reach the loaders' later checks and results. The
examples are derandomized, so CI sees the same ones on every run.

A first row `null` reaches no `datasets` reader: its JSON reader kills the process on it (a
segfault in pyarrow), so `lexrl.envs.data.read_table` checks JSON rows itself first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lexrl.errors import LexrlError

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    # The files are written anew for each example; tmp_path only gives them a folder.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SLOW_FUZZ = settings(FUZZ, max_examples=30)
"""For the loaders that go through `datasets` (about 0.3 s a file)."""


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
TEXT = st.text(max_size=24)
WORDS = st.text(min_size=1, max_size=24).filter(str.strip)
"""A value a loader takes as a text: not blank."""
RARELY = st.sampled_from([False] * 15 + [True])
"""True once in 16 draws: a file of several lines, each key of each line spoiled that often,
is still whole often enough for the loaders' later checks and their results to be reached."""


def mostly(usual: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    return RARELY.flatmap(lambda spoil: rare if spoil else usual)


@st.composite
def record(draw: st.DrawFn, **fields: st.SearchStrategy) -> dict:
    """An object with the keys of `fields` and plausible values, rarely one of them left out or
    holding any JSON."""
    row = {key: draw(mostly(value, JSON)) for key, value in fields.items()}
    if row and draw(RARELY):
        del row[draw(st.sampled_from(sorted(row)))]
    return row


@st.composite
def file_bytes(draw: st.DrawFn, text: st.SearchStrategy[str]) -> bytes:
    """`text` in UTF-8, rarely with a few arbitrary bytes inserted somewhere."""
    data = draw(text).encode("utf-8")
    if draw(RARELY):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


@st.composite
def lines(draw: st.DrawFn, records: st.SearchStrategy[dict], key: str) -> str:
    """JSON lines of `records`, distinct in `key` (a loader refuses a repeated id), rarely with
    a line of other JSON or text among them, or none."""
    if draw(RARELY):
        return ""
    rows = draw(st.lists(records, min_size=1, max_size=4, unique_by=lambda r: repr(r.get(key))))
    text = [json.dumps(row) for row in rows]
    if draw(RARELY):
        text.insert(draw(st.integers(0, len(text))), draw(JSON.map(json.dumps) | TEXT))
    return "\n".join(text)


def jsonl_file(records: st.SearchStrategy[dict], key: str) -> st.SearchStrategy[bytes]:
    return file_bytes(lines(records, key))


def json_file(value: st.SearchStrategy) -> st.SearchStrategy[bytes]:
    return file_bytes(mostly(value, JSON).map(json.dumps))


def loaded(load, *args: object) -> object:
    """What `load(*args)` returns, or None for a LexrlError; any other exception fails."""
    try:
        return load(*args)
    except LexrlError:
        return None


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


ARTICLE_IDS = st.sampled_from(["a1", "a2", 3])
ARTICLE = record(id=ARTICLE_IDS, name=TEXT, content=WORDS)
QUERY = record(
    id=st.text(max_size=3) | st.integers(0, 3),
    query=WORDS,
    gold=st.lists(ARTICLE_IDS, max_size=2, unique=True),
)


def check_statute(data: object) -> None:
    """The types the statute env reads from a load that succeeded."""
    if data is None:
        return
    ids = {article["id"] for article in data.corpus}
    for article in data.corpus:
        assert isinstance(article["name"], str) and isinstance(article["content"], str)
    for tasks in data.splits.values():
        assert len({task.id for task in tasks}) == len(tasks)
        for task in tasks:
            assert isinstance(task.id, str) and isinstance(task.inputs["query"], str)
            assert all(gold in ids for gold in task.gold)


@FUZZ
@given(
    corpus=jsonl_file(ARTICLE, "id"),
    train=jsonl_file(QUERY, "id"),
    test=jsonl_file(QUERY, "id"),
)
def test_statute_jsonl(tmp_path, corpus, train, test):
    from lexrl.envs.statute.data import load_jsonl

    write(tmp_path, "q_train.jsonl", train)
    write(tmp_path, "q_test.jsonl", test)
    corpus_path = write(tmp_path, "corpus.jsonl", corpus)
    check_statute(loaded(load_jsonl, corpus_path, str(tmp_path / "q_{split}.jsonl")))


@st.composite
def stard_query(draw: st.DrawFn, query_id: int) -> dict:
    """A query of STARD's `queries.json` whose gold articles it names and quotes."""
    names = draw(st.lists(st.sampled_from(["Art. 1", "Art. 2"]), max_size=2, unique=True))
    return draw(
        record(
            query_id=st.just(query_id),
            问题=WORDS,
            match_id=st.just(list(range(len(names)))),
            match_name=st.just(names),
            相关法规=st.fixed_dictionaries({name: WORDS for name in names}),
        )
    )


@st.composite
def stard_release(draw: st.DrawFn) -> tuple[list[dict], dict]:
    """STARD's queries and a train/test split of their ids."""
    ids = draw(st.lists(st.integers(0, 9), max_size=4, unique=True))
    queries = [draw(stard_query(query_id)) for query_id in ids]
    some_ids = st.lists(st.sampled_from(ids), unique=True) if ids else st.just([])
    return queries, draw(record(train=some_ids, test=some_ids))


@FUZZ
@given(release=stard_release(), spoiled=st.data(), corpus=st.none() | jsonl_file(ARTICLE, "id"))
def test_statute_stard(tmp_path, release, spoiled, corpus):
    from lexrl.envs.statute.data import load_stard

    queries, split = (spoiled.draw(json_file(st.just(part))) for part in release)
    corpus_path = write(tmp_path, "corpus.jsonl", corpus) if corpus is not None else None
    args = (write(tmp_path, "q.json", queries), write(tmp_path, "s.json", split), corpus_path)
    check_statute(loaded(load_stard, *args))


LABELS = st.sampled_from(["法一, 第1条:\n文", "法二, 第2条:\n文"])


@FUZZ
@given(
    queries=json_file(
        st.dictionaries(st.text(max_size=3), record(query=WORDS, label=st.lists(LABELS)))
    ),
    corpus=st.none() | json_file(st.lists(LABELS | TEXT, max_size=3)),
    allow_unmatched=st.booleans(),
)
def test_statute_csaid(tmp_path, queries, corpus, allow_unmatched):
    from lexrl.envs.statute.data import load_csaid

    corpus_path = write(tmp_path, "c.json", corpus) if corpus is not None else None
    check_statute(
        loaded(load_csaid, write(tmp_path, "q.json", queries), corpus_path, allow_unmatched)
    )


@FUZZ
@given(data=file_bytes(TEXT))
def test_statute_stopwords(tmp_path, data):
    from lexrl.envs.statute.data import load_stopwords

    words = loaded(load_stopwords, write(tmp_path, "stop.txt", data))
    assert words is None or all(isinstance(word, str) and word.strip() for word in words)


def gdpr_content() -> st.SearchStrategy[str]:
    question = record(
        whether_contains_decision=st.sampled_from(["true", "false", True]),
        question=WORDS,
        options=st.sampled_from([{}, {"Yes": "Yes", "No": "No"}, {"A": "a", "B": "b"}]),
        correct_answer=st.sampled_from(["Yes", "No", "A", "E"]),
    )
    entity = record(
        entity_or_concept=WORDS, legal_alignment=WORDS, legal_source=TEXT, rationale=WORDS
    )
    return st.one_of(question.map(json.dumps), entity.map(json.dumps), TEXT)


GDPR_ROW = record(
    content=gdpr_content(),
    type=st.sampled_from(["question", "background", "entity", "relation", "other"]),
    source=st.sampled_from(["case-a", "case-b"]),
    number=st.none() | st.integers(-1, 3),
)


@FUZZ
@given(rows=jsonl_file(GDPR_ROW, "content"))
def test_gdpr_maslegalbench(tmp_path, rows):
    from lexrl.envs.gdpr.data import load_maslegalbench

    bench = loaded(load_maslegalbench, str(write(tmp_path, "bench.jsonl", rows)))
    if bench is not None:
        assert bench.questions and len({q.id for q in bench.questions}) == len(bench.questions)


FACTOR_IDS = st.lists(st.sampled_from(["F1", "f2", "F3", "F25", "F99"]), max_size=3)
SCENARIO = record(
    id=st.sampled_from(["s1", "s2"]),
    kind=st.sampled_from(["arguable", "mismatched", "non_arguable"]),
    c1=FACTOR_IDS,
    c2=FACTOR_IDS,
    c3=FACTOR_IDS,
    c2_outcome=st.sampled_from(["P", "D"]),
    c3_outcome=st.sampled_from(["P", "D"]),
    complexity=st.none() | st.integers(0, 3),
)


@FUZZ
@given(lines=jsonl_file(SCENARIO, "id"))
def test_argument_scenarios(tmp_path, lines):
    from lexrl.envs.argument.scenarios import load_scenarios

    scenarios = loaded(load_scenarios, write(tmp_path, "scenarios.jsonl", lines))
    assert scenarios is None or len({s.id for s in scenarios}) == len(scenarios)


@pytest.fixture()
def datasets_cache(tmp_path, monkeypatch):
    """`datasets` caches every file it reads: keep the examples' caches out of the user's."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))


def test_a_file_whose_first_line_is_null_is_a_data_error(tmp_path):
    import subprocess
    import sys

    path = write(tmp_path, "null.jsonl", b'null\n{"question": "q"}\n')
    code = (
        "import datasets\n"
        f"datasets.config.HF_DATASETS_CACHE = {str(tmp_path / 'hf')!r}\n"
        "from pathlib import Path\n"
        "from lexrl.envs.data import DatasetError, read_table\n"
        "try:\n"
        f"    read_table(Path({str(path)!r}))\n"
        "except DatasetError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and str(path) in result.stdout, result.returncode


LEXAM_ROW = record(
    id=st.text(max_size=3) | st.integers(0, 3),
    question=WORDS,
    choices=st.lists(WORDS, min_size=4, max_size=4) | st.just("['a', 'b', 'c', 'd']"),
    gold=st.integers(-1, 4) | st.just("2"),
    course=WORDS,
    language=st.sampled_from(["en", "de"]),
    year=st.none() | st.integers(2000, 2024),
)


@SLOW_FUZZ
@given(rows=jsonl_file(LEXAM_ROW, "id"))
def test_lexam_local_file(tmp_path, datasets_cache, rows):
    from lexrl.envs.lexam.data import load_lexam

    path = write(tmp_path, "mcq.jsonl", rows)
    items = loaded(load_lexam, str(path), "mcq_4_choices")
    assert items is None or all(0 <= item.gold < 4 and len(item.choices) == 4 for item in items)


BAREXAM_ROW = record(
    idx=st.text(max_size=3) | st.integers(0, 3),
    prompt=TEXT,
    question=WORDS,
    choice_a=WORDS,
    choice_b=WORDS,
    choice_c=WORDS,
    choice_d=WORDS,
    answer=st.sampled_from(["A", "d", "E"]),
)
OAB_ITEM = record(
    question_id=st.integers(0, 3),
    statement=WORDS,
    ground_truth=record(reference_answer=WORDS, key_citations_expected=st.lists(TEXT, max_size=2)),
)


@SLOW_FUZZ
@given(
    rows=jsonl_file(BAREXAM_ROW, "idx"),
    oab=json_file(
        st.lists(OAB_ITEM, max_size=4, unique_by=lambda item: repr(item.get("question_id")))
    ),
)
def test_debate_barexam_and_oab_files(tmp_path, datasets_cache, rows, oab):
    from lexrl.envs.debate.data import barexam_tasks, oab_tasks

    for load, name, data in ((barexam_tasks, "bar.jsonl", rows), (oab_tasks, "oab.json", oab)):
        split = loaded(load, str(write(tmp_path, name, data)), 0.3, 0)
        assert split is None or set(split) == {"train", "test"}
