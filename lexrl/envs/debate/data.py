"""Debate questions: multiple-choice (LEXam MCQ configs, US bar exam) and open-ended (Brazilian
OAB), each turned into a Task whose `inputs` hold only what a debater or the judge may see.

- `lexam`: any LEXam MCQ config through the LEXam env's loader, split by course with a seed.
- `barexam`: the `reglab/barexam_qa` schema: `prompt` (the fact pattern, often shared by several
  questions, sometimes empty), `question`, `choice_a` .. `choice_d`, `answer` (A-D), `subject`,
  optional `idx`. From the Hub (its `train` and `test` splits), a local folder whose file names
  name the split (`train.jsonl`, `test.parquet`, ...), or one local file split with a seed by
  fact pattern (questions sharing a `prompt` stay on one side, so no fact pattern leaks).
- `oab`: the `ricardorudicz/oab_exams_guidelines` schema of seed 002 sec. 3.2: `question_id`,
  `statement`, `category`, `ground_truth.reference_answer` and the listed
  `ground_truth.key_citations_expected`. The expected citations are extracted from the
  reference answer with the citation parser (the seed's preprocessing), so the answer's
  citations and the reference's are normalised by the same code; the listed ones are kept in
  `meta`. No split of its own: questions are held out with a seed.

A malformed row raises DatasetError naming the file, the row (counting from 1) and the field.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from lexrl.envs.data import TABLE_FORMATS, DatasetError, read_table, text_field
from lexrl.envs.debate.citations import extract_citations
from lexrl.envs.lexam.data import load_lexam, split_by_course
from lexrl.types import Task

LETTERS = "ABCD"


def lexam_tasks(
    source: str, config: str, language: str | None, eval_fraction: float, seed: int
) -> dict[str, list[Task]]:
    """LEXam MCQs as debate tasks, whole courses held out (`split_by_course`)."""
    items = load_lexam(source, config, "test", language)
    if not items:
        raise DatasetError(f"{source}: no {language or 'any'}-language items of {config}")
    split = split_by_course(items, eval_fraction, seed)
    return {
        name: [
            mcq_task(item.id, item.question, item.choices, item.gold, item.course) for item in part
        ]
        for name, part in split.items()
    }


def mcq_task(id: str, question: str, choices: list[str], gold: int, subject: str) -> Task:
    return Task(
        id=id,
        inputs={"question": question, "choices": list(choices), "subject": subject},
        gold=gold,
        meta={"subject": subject, "n_options": len(choices)},
    )


def _rows(source: str, split: str | None) -> list[tuple[str, Iterable[Mapping]]]:
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
    if path.suffix in TABLE_FORMATS:
        raise DatasetError(f"dataset file not found: {path}")
    import datasets

    return [(f"{source} ({split})", datasets.load_dataset(source, split=split or "train"))]


def barexam_task(row: Mapping, where: str) -> Task:
    facts = text_field(row, "prompt", where, required=False) or ""
    question = text_field(row, "question", where)
    choices = [text_field(row, f"choice_{letter.lower()}", where) for letter in LETTERS]
    answer = (text_field(row, "answer", where) or "").strip().upper()
    if answer not in LETTERS:
        raise DatasetError(f"{where}: `answer` {answer!r} is not one of A, B, C, D")
    identifier = row.get("idx", row.get("id"))
    if identifier is None or identifier == "":
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


def _unique(tasks: list[Task], wheres: list[str]) -> None:
    seen: dict[str, str] = {}
    for task, where in zip(tasks, wheres, strict=True):
        if task.id in seen:
            raise DatasetError(f"{where}: id {task.id!r} repeats {seen[task.id]}")
        seen[task.id] = where


def _read(source: str, split: str | None, parse: Callable[[Mapping, str], Task]) -> list[Task]:
    tasks, wheres = [], []
    for name, rows in _rows(source, split):
        for number, row in enumerate(rows, start=1):
            where = f"{name} row {number}"
            tasks.append(parse(row, where))
            wheres.append(where)
    _unique(tasks, wheres)
    return tasks


def seeded_split(
    tasks: list[Task], key: str | None, eval_fraction: float, seed: int
) -> dict[str, list[Task]]:
    """{"train", "test"}: the groups of tasks sharing `meta[key]` (each task its own group
    when `key` is None) shuffled with `seed`, whole groups held out until test holds at least
    `eval_fraction` of the tasks. Within a side, tasks keep their input order."""
    if not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must be in (0, 1), got {eval_fraction}")
    groups: dict[str, int] = {}
    for task in tasks:
        name = task.id if key is None or not task.meta.get(key) else task.meta[key]
        groups[name] = groups.get(name, 0) + 1
    order = sorted(groups)
    random.Random(seed).shuffle(order)
    held, test = 0, set()
    for name in order:
        if held >= eval_fraction * len(tasks):
            break
        test.add(name)
        held += groups[name]

    def side(task: Task) -> str:
        name = task.id if key is None or not task.meta.get(key) else task.meta[key]
        return "test" if name in test else "train"

    return {s: [t for t in tasks if side(t) == s] for s in ("train", "test")}


def barexam_tasks(source: str, eval_fraction: float, seed: int) -> dict[str, list[Task]]:
    """The source's own `train` and `test` splits (Hub, or a folder of split-named files);
    a single file is split with `seed` by fact pattern."""
    if Path(source).is_file():
        return seeded_split(_read(source, None, barexam_task), "facts", eval_fraction, seed)
    return {split: _read(source, split, barexam_task) for split in ("train", "test")}


def oab_task(row: Mapping, where: str) -> Task:
    identifier = row.get("question_id")
    if identifier is None or identifier == "":
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
        _unique(tasks, [f"{path} item {n}" for n in range(1, len(tasks) + 1)])
    else:
        tasks = _read(source, None, oab_task)
    return seeded_split(tasks, None, eval_fraction, seed)


def _json_list(path: Path) -> list[Mapping]:
    """A JSON file holding a list of records (the seed's release format)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
    if isinstance(data, Mapping):
        data = data.get("questions", data.get("data"))
    if not isinstance(data, list) or not all(isinstance(row, Mapping) for row in data):
        raise DatasetError(f"{path}: expected a list of question objects")
    return data
