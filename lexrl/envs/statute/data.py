"""STARD and CSAID loading.

STARD (Su et al. 2024, github oneal2000/STARD, MIT licence).

Files of the public release: `queries.json` (a JSON list; `query_id`, `问题`, `相关法规` {article
name: text}, `match_id` [corpus ids], `match_name`), a split file `{"train": [query_id], "test":
[...]}` (the 1,234/309 split later work uses; it ships as `stard_split.json` beside this module,
from the LeCoQA release, MIT, Copyright (c) 2024 THUIR), and `corpus.jsonl` (`{"id", "name", "content"}` a
line, 55,348 articles). Without a corpus file the union of the gold articles named in the queries
file is the corpus; `StardData.corpus_source` says which, so every report can say so. That corpus
is keyed by article name (ids number the names in order of first appearance), as STARD's own
evaluation is: `match_id` cannot be paired with `match_name` by position, since the release lists
ids in ascending order and names in the order of `相关法规` (the pairs cross in at least 195
multi-article queries, and 113 articles would sit under another article's id).
`cn_stopwords.txt` beside this module is STARD's BM25 stopword list (MIT, Copyright (c) 2024 THUIR).

CSAID (118 test queries; Li et al. 2026, "LegalMALR", arXiv:2601.17692, sec. 3.2.1): a JSON dict
keyed by query id of `{"query", "label": [article strings], "label_length"}`, and a corpus that is a
JSON list of article strings written `"<law name(version)>, 第X条:\n【title】text"`. Gold labels carry
no ids, so they are matched to corpus entries by normalised text (NFKC, whitespace removed).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from lexrl.envs.data import (
    check_unique,
    read_json,
    read_jsonl_lines,
    require_some,
    text_field,
    utf8,
)
from lexrl.errors import DatasetError
from lexrl.types import Task


@dataclass
class StatuteData:
    corpus: list[dict]
    splits: dict[str, list[Task]]
    corpus_source: str
    """`corpus.jsonl (<path>)` or `gold-article union of <queries path>`."""
    notes: list[str] = field(default_factory=list)


def _stopword_set(text: str) -> frozenset[str]:
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def default_stopwords() -> frozenset[str]:
    return _stopword_set(
        (resources.files("lexrl.envs.statute") / "cn_stopwords.txt").read_text(encoding="utf-8")
    )


def load_stopwords(path: str | Path) -> frozenset[str]:
    if not Path(path).is_file():
        raise DatasetError(f"stopword file not found: {path}")
    with utf8(path):
        return _stopword_set(Path(path).read_text(encoding="utf-8"))


def _identifier(value: object, where: str, key: str) -> str | int:
    """An id as JSON gives it: a string or an integer (bool is an int to Python, not an id)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise DatasetError(f"{where}: `{key}` must be a string or an integer, not {value!r:.60}")
    return value


def _identifiers(value: object, where: str, key: str) -> list[str | int]:
    if not isinstance(value, list):
        raise DatasetError(f"{where}: `{key}` must be a list of ids, not {value!r:.60}")
    return [_identifier(item, where, key) for item in value]


def _strings(value: object, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DatasetError(f"{where}: `{key}` must be a list of strings, not {value!r:.60}")
    return value


def default_stard_split() -> Path:
    """The 1,234/309 query_id split later work uses (from the LeCoQA release, MIT), shipped here."""
    return Path(str(resources.files("lexrl.envs.statute") / "stard_split.json"))


def _check_stard_query(record: object, where: str) -> None:
    """DatasetError naming `where` and the key for a query of STARD's file that lacks a key or
    holds a value of another type."""
    if not isinstance(record, dict):
        raise DatasetError(f"{where} is a JSON {type(record).__name__}, not an object")
    missing = [
        k for k in ("query_id", "问题", "match_id", "match_name", "相关法规") if k not in record
    ]
    if missing:
        raise DatasetError(f"{where} lacks {', '.join(missing)}")
    _identifier(record["query_id"], where, "query_id")
    text_field(record, "问题", where)
    _identifiers(record["match_id"], where, "match_id")
    _strings(record["match_name"], where, "match_name")
    laws = record["相关法规"]
    if not isinstance(laws, dict) or not all(isinstance(text, str) for text in laws.values()):
        raise DatasetError(f"{where}: `相关法规` must map article names to their texts")


def load_stard(
    queries_path: str | Path, split_path: str | Path | None, corpus_path: str | Path | None = None
) -> StatuteData:
    """STARD with `split_path` (empty: the shipped 1,234/309 split)."""
    queries_path = Path(queries_path)
    split_path = Path(split_path) if split_path else default_stard_split()
    with utf8(queries_path):
        records = read_json(queries_path)
    if not isinstance(records, list):
        raise DatasetError(f"{queries_path}: expected a JSON list of queries")
    require_some(records, "queries", queries_path)
    seen_ids: dict = {}
    by_id: dict[int, dict] = {}
    gold_articles: dict[str, dict] = {}
    for position, record in enumerate(records):
        _check_stard_query(record, f"{queries_path}: query #{position}")
        if len(record["match_id"]) != len(record["match_name"]):
            raise DatasetError(
                f"{queries_path}: query_id {record['query_id']}: match_id and match_name differ in length"
            )
        check_unique(
            [(record["query_id"], f"{queries_path} query #{position}")], "query_id", seen_ids
        )
        by_id[record["query_id"]] = record
        for name in record["match_name"]:
            if name not in record["相关法规"]:
                raise DatasetError(
                    f"{queries_path}: query_id {record['query_id']}: no text for gold article {name!r}"
                )
            gold_articles.setdefault(
                name,
                {
                    "id": len(gold_articles),
                    "name": name,
                    "content": record["相关法规"][name].strip(),
                },
            )

    if corpus_path:
        corpus = read_corpus(corpus_path)
        source = f"corpus.jsonl ({corpus_path})"
    else:
        corpus = list(gold_articles.values())
        source = f"gold-article union of {queries_path} ({len(corpus)} articles; far easier than the full corpus)"
    known = {article["id"] for article in corpus}

    with utf8(split_path):
        split = read_json(split_path)
    if not isinstance(split, dict):
        raise DatasetError(f'{split_path}: expected {{"train": [...], "test": [...]}}')
    splits, notes = {}, []
    for name in ("train", "test"):
        if name not in split:
            raise DatasetError(f"{split_path}: no `{name}` list")
        _identifiers(split[name], str(split_path), name)
        check_unique((qid, f"{split_path} `{name}` item {n}") for n, qid in enumerate(split[name]))
        unknown = [qid for qid in split[name] if qid not in by_id]
        if unknown:
            raise DatasetError(
                f"{split_path}: `{name}` names query_id(s) {unknown[:5]} not in {queries_path}"
            )
        tasks = []
        for qid in split[name]:
            record = by_id[qid]
            listed = (
                record["match_id"]
                if corpus_path
                else [gold_articles[article]["id"] for article in record["match_name"]]
            )
            gold = [g for g in listed if g in known]
            if len(gold) < len(record["match_id"]):
                notes.append(
                    f"query_id {qid}: {len(record['match_id']) - len(gold)} gold article(s) not in the corpus"
                )
            tasks.append(Task(id=str(qid), inputs={"query": record["问题"]}, gold=gold))
        splits[name] = tasks
    return StatuteData(corpus=corpus, splits=splits, corpus_source=source, notes=notes)


def read_corpus(path: str | Path) -> list[dict]:
    """The articles of a corpus file, one `{"id", "name", "content"}` a line; a repeated id
    raises DatasetError naming both lines, as does an empty file."""
    with utf8(path):
        lines = list(read_jsonl_lines(path, required=("id", "name", "content"), unique="id"))
    for number, article in lines:
        where = f"{path}:{number}"
        _identifier(article["id"], where, "id")
        for key in ("name", "content"):
            if not isinstance(article[key], str):
                raise DatasetError(f"{where}: `{key}` must be a string, not {article[key]!r:.60}")
    return require_some([article for _, article in lines], "articles", path)


def _query_task(record: dict, where: str, known: set, seen: dict, corpus_path: object) -> Task:
    """The task of one line of a `jsonl` query file. Ids are compared as the strings tasks
    carry, so `1` and `"1"` are one id; `seen` holds those met so far."""
    identifier = str(_identifier(record["id"], where, "id"))
    check_unique([(identifier, where)], "id", seen)
    query = text_field(record, "query", where)
    gold = _identifiers(record["gold"], where, "gold")
    unknown = [g for g in gold if g not in known]
    if unknown:
        raise DatasetError(f"{where}: gold id(s) {unknown} not in {corpus_path}")
    return Task(id=identifier, inputs={"query": query}, gold=gold)


def load_jsonl(corpus_path: str | Path, queries_path: str) -> StatuteData:
    """A corpus file (`read_corpus`) and a query file per split, `queries_path` with `{split}`
    for train and test, of `{"id", "query", "gold"}` lines. A repeated query id, gold outside
    the corpus or a file without queries raises DatasetError naming the file (and lines)."""
    corpus = read_corpus(corpus_path)
    known = {article["id"] for article in corpus}
    splits = {}
    for split in ("train", "test"):
        path = queries_path.format(split=split)
        with utf8(path):
            lines = list(read_jsonl_lines(path, required=("id", "query", "gold")))
        seen: dict = {}
        tasks = [
            _query_task(record, f"{path}:{number}", known, seen, corpus_path)
            for number, record in lines
        ]
        splits[split] = require_some(tasks, "queries", path)
    return StatuteData(corpus=corpus, splits=splits, corpus_source=f"corpus.jsonl ({corpus_path})")


_WHITESPACE = re.compile(r"\s+")


def normalise_article(text: str) -> str:
    """The form CSAID gold labels and corpus entries are compared in: NFKC, no whitespace."""
    return _WHITESPACE.sub("", unicodedata.normalize("NFKC", text))


def _csaid_article(index: int, text: str) -> dict:
    name, separator, content = text.partition(":\n")
    if not separator:
        name, content = text[:40], text
    return {"id": index, "name": name.strip(), "content": content.strip()}


def load_csaid(
    queries_path: str | Path, corpus_path: str | Path | None = None, allow_unmatched: bool = False
) -> StatuteData:
    """CSAID as a `test` split. Gold that matches no corpus entry stops the load with the count
    and examples, unless `allow_unmatched`: then it is dropped and counted in `notes` (a query
    left with no gold is dropped too). A label that repeats an article already in the query's
    gold (the release lists some twice, at times differing only in whitespace) counts once and is
    noted as a duplicate; `Task.meta["gold_labels_listed"]` keeps the count as listed."""
    queries_path = Path(queries_path)
    with utf8(queries_path):
        records = read_json(queries_path, unique_keys=True)
    if not isinstance(records, dict):
        raise DatasetError(
            f'{queries_path}: expected a JSON dict {{query id: {{"query", "label"}}}}'
        )
    require_some(records, "queries", queries_path)
    for key, record in records.items():
        missing = [k for k in ("query", "label") if not isinstance(record, dict) or k not in record]
        if missing:
            raise DatasetError(f"{queries_path}: entry {key!r} lacks {', '.join(missing)}")
        where = f"{queries_path}: entry {key!r}"
        text_field(record, "query", where)
        _strings(record["label"], where, "label")
    if corpus_path:
        with utf8(corpus_path):
            texts = read_json(corpus_path)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise DatasetError(f"{corpus_path}: expected a JSON list of article strings")
        source = f"CSAID corpus ({corpus_path}, {len(texts)} articles)"
    else:
        # One entry per article: a label repeated with other whitespace is the same article.
        by_form = {}
        for record in records.values():
            for label in record["label"]:
                by_form.setdefault(normalise_article(label), label)
        texts = list(by_form.values())
        source = f"gold-article union of {queries_path} ({len(texts)} articles; far easier than the full corpus)"
    corpus = [_csaid_article(index, text) for index, text in enumerate(texts)]
    by_text: dict[str, int] = {}
    for index, text in enumerate(texts):
        by_text.setdefault(normalise_article(text), index)

    tasks, notes, unmatched = [], [], []
    for key, record in records.items():
        gold, duplicates = [], 0
        for label in record["label"]:
            index = by_text.get(normalise_article(label))
            if index is None:
                unmatched.append((key, label))
            elif index in gold:
                duplicates += 1
            else:
                gold.append(index)
        missing = len(record["label"]) - len(gold) - duplicates
        if duplicates:
            notes.append(
                f"query {key}: {duplicates} duplicate gold label(s) (an article listed again)"
            )
        if missing:
            notes.append(f"query {key}: {missing} gold label(s) unmatched")
        if gold:
            listed = {"gold_labels_listed": len(record["label"])}
            tasks.append(
                Task(id=str(key), inputs={"query": record["query"]}, gold=gold, meta=listed)
            )
        else:
            notes.append(f"query {key}: dropped, no gold label matches the corpus")
    if unmatched and not allow_unmatched:
        examples = "; ".join(f"{key}: {label[:40]!r}" for key, label in unmatched[:3])
        raise DatasetError(
            f"{queries_path}: {len(unmatched)} gold label(s) match no article of {corpus_path} "
            f"after normalisation (e.g. {examples}); set `env.allow_unmatched_gold: true` "
            "to drop them and continue"
        )
    return StatuteData(corpus=corpus, splits={"test": tasks}, corpus_source=source, notes=notes)
