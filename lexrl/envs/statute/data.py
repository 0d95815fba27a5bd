"""STARD loading (Su et al. 2024, github oneal2000/STARD, MIT licence).

Files of the public release: `queries.json` (a JSON list; `query_id`, `问题`, `相关法规` {article
name: text}, `match_id` [corpus ids], `match_name`), a split file `{"train": [query_id], "test":
[...]}` (the 1,234/309 split later work uses), and `corpus.jsonl` (`{"id", "name", "content"}` a
line, 55,348 articles). Without a corpus file the union of the gold articles named in the queries
file is the corpus; `StardData.corpus_source` says which, so every report can say so.
`cn_stopwords.txt` beside this module is STARD's BM25 stopword list (MIT, Copyright (c) 2024 THUIR).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from lexrl.envs.data import DatasetError, read_json, read_jsonl
from lexrl.types import Task


@dataclass
class StardData:
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
    return _stopword_set(Path(path).read_text(encoding="utf-8"))


def load_stard(
    queries_path: str | Path, split_path: str | Path, corpus_path: str | Path | None = None
) -> StardData:
    queries_path, split_path = Path(queries_path), Path(split_path)
    records = read_json(queries_path)
    if not isinstance(records, list):
        raise DatasetError(f"{queries_path}: expected a JSON list of queries")
    by_id: dict[int, dict] = {}
    gold_articles: dict[int, dict] = {}
    for position, record in enumerate(records):
        missing = [
            k for k in ("query_id", "问题", "match_id", "match_name", "相关法规") if k not in record
        ]
        if missing:
            raise DatasetError(f"{queries_path}: query #{position} lacks {', '.join(missing)}")
        if len(record["match_id"]) != len(record["match_name"]):
            raise DatasetError(
                f"{queries_path}: query_id {record['query_id']}: match_id and match_name differ in length"
            )
        by_id[record["query_id"]] = record
        for article_id, name in zip(record["match_id"], record["match_name"], strict=True):
            if name not in record["相关法规"]:
                raise DatasetError(
                    f"{queries_path}: query_id {record['query_id']}: no text for gold article {name!r}"
                )
            gold_articles[article_id] = {
                "id": article_id,
                "name": name,
                "content": record["相关法规"][name].strip(),
            }

    if corpus_path:
        corpus = list(read_jsonl(corpus_path, required=("id", "name", "content")))
        source = f"corpus.jsonl ({corpus_path})"
    else:
        corpus = [gold_articles[i] for i in sorted(gold_articles)]
        source = f"gold-article union of {queries_path} ({len(corpus)} articles; far easier than the full corpus)"
    known = {article["id"] for article in corpus}

    split = read_json(split_path)
    if not isinstance(split, dict):
        raise DatasetError(f'{split_path}: expected {{"train": [...], "test": [...]}}')
    splits, notes = {}, []
    for name in ("train", "test"):
        if name not in split:
            raise DatasetError(f"{split_path}: no `{name}` list")
        unknown = [qid for qid in split[name] if qid not in by_id]
        if unknown:
            raise DatasetError(
                f"{split_path}: `{name}` names query_id(s) {unknown[:5]} not in {queries_path}"
            )
        tasks = []
        for qid in split[name]:
            record = by_id[qid]
            gold = [g for g in record["match_id"] if g in known]
            if len(gold) < len(record["match_id"]):
                notes.append(
                    f"query_id {qid}: {len(record['match_id']) - len(gold)} gold article(s) not in the corpus"
                )
            tasks.append(Task(id=str(qid), inputs={"query": record["问题"]}, gold=gold))
        splits[name] = tasks
    return StardData(corpus=corpus, splits=splits, corpus_source=source, notes=notes)
