"""Debate questions: multiple-choice (LEXam MCQ configs, US bar exam) and open-ended (Brazilian
OAB), each turned into a Task whose `inputs` hold only what a debater or the judge may see.

- `lexam`: any LEXam MCQ config through the LEXam env's loader, split with a seed by course or,
  stratified by course, by groups of questions sharing a statement (`LEXAM_SPLITS`).
- `barexam`: the `reglab/barexam_qa` schema: `prompt` (the fact pattern, often shared by several
  questions, sometimes empty), `question`, `choice_a` .. `choice_d`, `answer` (A-D), `subject`,
  optional `idx`. From the Hub (its `train` and `test` splits), a local folder whose file names
  name the split (`train.jsonl`, `test.parquet`, ...), or one local file split with a seed by
  fact pattern (questions sharing a `prompt` stay on one side, so no fact pattern leaks).
- `oab`: the `ricardorudicz/oab_exams_guidelines` schema of the MAD_legal technical report
  ("Multi-Agent Debate for Brazilian Legal Reasoning", 2024), sec. 3.2: `question_id`,
  `statement`, `category`, `ground_truth.reference_answer` and the listed
  `ground_truth.key_citations_expected`. The expected citations are extracted from the
  reference answer with the citation parser (the report's preprocessing), so the answer's
  citations and the reference's are normalised by the same code; the listed ones are kept in
  `meta`. No split of its own: questions are held out with a seed.

A malformed row raises DatasetError naming the file, the row (counting from 1) and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from lexrl.envs.data import (
    TABLE_FORMATS,
    check_unique,
    load_hub,
    missing_value,
    read_table,
    split_by_group,
    text_field,
    utf8,
)
from lexrl.envs.debate.citations import extract_citations
from lexrl.envs.lexam.data import load_lexam, split_by_course, split_by_facts
from lexrl.errors import DatasetError
from lexrl.types import Task

LETTERS = "ABCD"
LEXAM_SPLITS = {"course": split_by_course, "facts": split_by_facts}


def lexam_tasks(
    source: str, config: str, language: str | None, eval_fraction: float, seed: int, split: str
) -> dict[str, list[Task]]:
    """LEXam MCQs as debate tasks, held out by `split` (`LEXAM_SPLITS`)."""
    items = load_lexam(source, config, "test", language)
    if not items:
        raise DatasetError(f"{source}: no {language or 'any'}-language items of {config}")
    parts = LEXAM_SPLITS[split](items, eval_fraction, seed)
    return {
        name: [
            mcq_task(item.id, item.question, item.choices, item.gold, item.course) for item in part
        ]
        for name, part in parts.items()
    }


def mcq_task(id: str, question: str, choices: list[str], gold: int, subject: str) -> Task:
    return Task(
        id=id,
        inputs={"question": question, "choices": list(choices), "subject": subject},
        gold=gold,
        meta={"subject": subject, "n_options": len(choices)},
    )


def _rows(
    source: str, split: str | None, hub_config: str | None = None
) -> list[tuple[str, Iterable[Mapping]]]:
    """(name, rows) parts of a local file, the split's files of a local folder, or a Hub split."""
    path = Path(source)
    if path.is_file():
        return [(str(path), read_table(path))]
    if path.is_dir():
        files = sorted(
            p
            for p in path.rglob("*")
            if p.suffix in TABLE_FORMATS and (split is None or split in p.name)
        )
        if not files:
            raise DatasetError(f"{path}: no {split or ''} file ({', '.join(TABLE_FORMATS)})")
        return [(str(file), read_table(file)) for file in files]
    loaded = load_hub(source, hub_config, split=split or "train")
    return [(f"{source} ({hub_config or 'default'}, {split})", loaded)]


def barexam_task(row: Mapping, where: str) -> Task:
    facts = text_field(row, "prompt", where, required=False) or ""
    question = text_field(row, "question", where)
    choices = [text_field(row, f"choice_{letter.lower()}", where) for letter in LETTERS]
    answer = (text_field(row, "answer", where) or "").strip().upper()
    if answer not in LETTERS:
        raise DatasetError(f"{where}: `answer` {answer!r} is not one of A, B, C, D")
    identifier = row.get("idx", row.get("id"))
    if missing_value(identifier) or identifier == "":
        raise DatasetError(f"{where}: missing field `idx` (or `id`)")
    text = f"{facts.strip()}\n\n{question.strip()}" if facts.strip() else question.strip()
    task = mcq_task(
        f"barexam-{identifier}",
        text,
        choices,
        LETTERS.index(answer),
        text_field(row, "subject", where, required=False) or "",
    )
    task.meta["facts"] = facts.strip()
    return task


def _read(
    source: str,
    split: str | None,
    parse: Callable[[Mapping, str], Task],
    hub_config: str | None = None,
) -> list[Task]:
    tasks, wheres = [], []
    for name, rows in _rows(source, split, hub_config):
        for number, row in enumerate(rows, start=1):
            where = f"{name} row {number}"
            tasks.append(parse(row, where))
            wheres.append(where)
    check_unique(zip((task.id for task in tasks), wheres, strict=True))
    return tasks


def _fact_pattern(task: Task) -> str:
    """Questions sharing a non-empty fact pattern form one group; any other question its own."""
    return task.meta["facts"] or task.id


def barexam_tasks(
    source: str, eval_fraction: float, seed: int, hub_config: str = "qa"
) -> dict[str, list[Task]]:
    """The source's own `train` and `test` splits (Hub, or a folder of split-named files);
    a single file is split with `seed` by fact pattern."""
    if Path(source).is_file():
        return split_by_group(_read(source, None, barexam_task), _fact_pattern, eval_fraction, seed)
    return {split: _read(source, split, barexam_task, hub_config) for split in ("train", "test")}


def oab_task(row: Mapping, where: str) -> Task:
    identifier = row.get("question_id")
    if missing_value(identifier) or identifier == "":
        raise DatasetError(f"{where}: missing field `question_id`")
    truth = row.get("ground_truth")
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError:
            raise DatasetError(f"{where}: `ground_truth` is not a JSON object") from None
    if not isinstance(truth, Mapping):
        raise DatasetError(f"{where}: missing field `ground_truth` (an object)")
    reference = text_field(truth, "reference_answer", f"{where} ground_truth")
    listed = truth.get("key_citations_expected") or []
    if not isinstance(listed, list | tuple) or not all(isinstance(c, str) for c in listed):
        raise DatasetError(f"{where}: `ground_truth.key_citations_expected` is not a string list")
    category = text_field(row, "category", where, required=False) or ""
    return Task(
        id=f"oab-{identifier}",
        inputs={"statement": text_field(row, "statement", where), "category": category},
        gold={"reference": reference, "citations": extract_citations(reference)},
        meta={"category": category, "listed_citations": list(listed)},
    )


def oab_tasks(source: str, eval_fraction: float, seed: int) -> dict[str, list[Task]]:
    """OAB questions, `eval_fraction` of them held out with `seed` (the release has no split)."""
    path = Path(source)
    if path.suffix == ".json" and path.is_file():
        rows = _json_list(path)
        tasks = [oab_task(row, f"{path} item {n}") for n, row in enumerate(rows, start=1)]
        check_unique((task.id, f"{path} item {n}") for n, task in enumerate(tasks, start=1))
    else:
        tasks = _read(source, None, oab_task)
    return split_by_group(tasks, lambda task: task.id, eval_fraction, seed)


def _json_list(path: Path) -> list[Mapping]:
    """A JSON file holding a list of records (the report's release format)."""
    try:
        with utf8(path):
            data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    if isinstance(data, Mapping):
        data = data.get("questions", data.get("data"))
    if not isinstance(data, list) or not all(isinstance(row, Mapping) for row in data):
        raise DatasetError(f"{path}: expected a list of question objects")
    return data
