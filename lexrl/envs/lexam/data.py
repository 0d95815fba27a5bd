"""LEXam loading (Fan et al. 2025, arXiv 2505.12864; data CC-BY-4.0, HF `LEXam-Benchmark/LEXam`).

Configs: `mcq_4_choices`, `mcq_8_choices`, `mcq_16_choices`, `mcq_32_choices` (fields
`question`, `choices`, `gold` = 0-based index, `course`, `language`, `area`, `jurisdiction`,
`year`, `id`, ...; the 8/16/32 files carry no area/jurisdiction/year) and `open_question`
(`question`, `answer` = the reference answer, the same metadata). A source is a Hub id or a local
file or directory of parquet, JSONL/JSON, CSV or the release's xlsx. The release's xlsx stores
`choices` as the string literal of a Python list, and `MCQs_test_perturbation.xlsx` keeps every
option count in one sheet as `<N>_choices` / `<N>_choices_gold`: for `mcq_<N>_choices` those columns
are read when present. A malformed row raises DatasetError naming the file, the row (records count
from 1; a CSV or xlsx header is not a row) and the field.

One real MCQ-4 row (course "Swiss Law", language "en", id fe99a075-...): question "Which of the
following statements is/are incorrect?\ni. The scientification of law in Switzerland during the
19th century was most prominently promoted by Friedrich Ludwig Keller and Johann Caspar
Bluntschli.\nii. ...\niii. ...", choices ["ii and iii", "iii", "i and iii", "i and ii"], gold 2.

LEXam has no training split: `split_by_course` carves one out by course (docs/sources.md), and
`split_by_facts` one stratified by course, for a sample with too few courses to hold any out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from lexrl.envs.data import (
    TABLE_FORMATS,
    check_unique,
    load_hub,
    missing_value,
    read_table,
    split_by_group,
    text_field,
)
from lexrl.errors import ConfigError, DatasetError
from lexrl.types import Task

MCQ_CONFIGS = ("mcq_4_choices", "mcq_8_choices", "mcq_16_choices", "mcq_32_choices")
CONFIGS = (*MCQ_CONFIGS, "open_question")
LANGUAGES = ("en", "de")
_SAMPLES = {"mcq_4_choices": "mcq_4_choices.en.jsonl", "open_question": "open_question.en.jsonl"}
_PERTURBATION = ("MCQs_test_perturbation.xlsx",)
# "iii. ", "b) ", "2. ": how LEXam numbers an MCQ's statements.
_ENUMERATOR = re.compile(r"^(?:[ivxlc]+|[a-z]|[0-9]{1,2})[.)]\s+", re.IGNORECASE)
_RELEASE_NAMES = {
    "mcq_4_choices": ("MCQs_test.xlsx",),
    "mcq_8_choices": _PERTURBATION,
    "mcq_16_choices": _PERTURBATION,
    "mcq_32_choices": _PERTURBATION,
    "open_question": ("open_questions_dev.xlsx", "open_questions_test.xlsx"),
}


@dataclass
class LexamItem:
    id: str
    question: str
    choices: list[str] | None
    """The options in order; None for an open question."""
    gold: int | None
    """0-based index into `choices`; None for an open question."""
    answer: str | None
    """The reference answer of an open question; None for an MCQ."""
    course: str
    language: str
    area: str | None
    jurisdiction: str | None
    year: int | None
    n_options: int | None
    """len(choices); None for an open question."""


def to_task(item: LexamItem) -> Task:
    """`inputs` holds what an examinee may see; the course is among them because the paper's
    examinee prompts name it ("You are an expert in <course>")."""
    return Task(
        id=item.id,
        inputs={
            "question": item.question,
            "choices": item.choices,
            "language": item.language,
            "course": item.course,
        },
        gold=item.gold if item.choices is not None else item.answer,
        meta={
            "course": item.course,
            "language": item.language,
            "n_options": item.n_options,
            "area": item.area,
        },
    )


def default_sample(config: str) -> Path:
    """The attributed English sample shipped beside this module (see `sample/README.md`)."""
    if config not in _SAMPLES:
        raise DatasetError(
            f"no shipped LEXam sample for `{config}`; shipped: {', '.join(_SAMPLES)}"
        )
    return Path(str(resources.files("lexrl.envs.lexam") / "sample" / _SAMPLES[config]))


def _options_of(config: str) -> int | None:
    if config not in CONFIGS:
        raise ConfigError(f"unknown LEXam config `{config}`; one of {', '.join(CONFIGS)}")
    match = re.fullmatch(r"mcq_(\d+)_choices", config)
    return int(match.group(1)) if match else None


def _integer(row: Mapping, key: str, where: str, required: bool = True) -> int | None:
    value = row.get(key)
    if missing_value(value):
        if required:
            raise DatasetError(f"{where}: missing field `{key}`")
        return None
    # CSV, xlsx and the release's string-typed columns hand integers over as "3" or 3.0.
    if isinstance(value, str):
        try:
            value = float(value.strip()) if "." in value else int(value.strip())
        except ValueError:
            raise DatasetError(f"{where}: `{key}` is not an integer: {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise DatasetError(f"{where}: `{key}` is not an integer: {value!r}")
    return value


def _identifier(row: Mapping, where: str) -> str:
    # CSV readers turn numeric-looking ids into numbers; the id is a name either way.
    value = row.get("id")
    if isinstance(value, int | float) and not missing_value(value):
        return str(_integer(row, "id", where))
    return text_field(row, "id", where)


def _choices(row: Mapping, key: str, where: str) -> list[str]:
    value = row.get(key)
    if missing_value(value):
        raise DatasetError(f"{where}: missing field `{key}`")
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise DatasetError(f"{where}: `{key}` is not a list literal: {value[:80]!r}") from None
    if not isinstance(value, list | tuple) or not value:
        raise DatasetError(f"{where}: `{key}` is not a non-empty list: {str(value)[:80]!r}")
    for index, choice in enumerate(value):
        if not isinstance(choice, str):
            raise DatasetError(f"{where}: `{key}[{index}]` is not a string: {choice!r}")
    return list(value)


def _item(row: Mapping, n_options: int | None, keys: tuple[str, str], where: str) -> LexamItem:
    choices = gold = answer = None
    if n_options is None:
        answer = text_field(row, "answer", where)
    else:
        choices_key, gold_key = keys
        choices = _choices(row, choices_key, where)
        if len(choices) != n_options:
            raise DatasetError(
                f"{where}: `{choices_key}` has {len(choices)} options, the config {n_options}"
            )
        gold = _integer(row, gold_key, where)
        if not 0 <= gold < n_options:
            raise DatasetError(
                f"{where}: `{gold_key}` {gold} is out of range for {n_options} options"
            )
    return LexamItem(
        id=_identifier(row, where),
        question=text_field(row, "question", where),
        choices=choices,
        gold=gold,
        answer=answer,
        course=text_field(row, "course", where),
        language=text_field(row, "language", where),
        area=text_field(row, "area", where, required=False),
        jurisdiction=text_field(row, "jurisdiction", where, required=False),
        year=_integer(row, "year", where, required=False),
        n_options=n_options,
    )


def _release_files(directory: Path, config: str) -> list[Path]:
    # The release's own names (github LEXam-Benchmark/LEXam, `data/`): every MCQ-4 row in one
    # file, every larger option count in one perturbation file (`<N>_choices` columns).
    names = _RELEASE_NAMES.get(config, ())
    for folder in (directory, directory / "data"):
        found = [folder / name for name in names if (folder / name).is_file()]
        if found:
            return found
    return []


def _files(directory: Path, config: str, split: str | None) -> list[Path]:
    """Files of `config` in `directory`: everything under `<config>/` (the Hub's layout), or the
    files whose name starts with the config, or else the release's own file names in the folder
    or its `data/` (`MCQs_test.xlsx` for `mcq_4_choices`, `MCQs_test_perturbation.xlsx` for
    8, 16 and 32 options, `open_questions_{dev,test}.xlsx`); with `split`, those whose name
    contains it."""
    nested = directory / config
    candidates = (
        sorted(nested.rglob("*")) if nested.is_dir() else sorted(directory.glob(f"{config}*"))
    )
    if not any(path.is_file() and path.suffix in TABLE_FORMATS for path in candidates):
        candidates = _release_files(directory, config)
    files = [
        path
        for path in candidates
        if path.is_file() and path.suffix in TABLE_FORMATS and (split is None or split in path.name)
    ]
    if not files:
        wanted = f"`{config}`" + (f" split `{split}`" if split else "")
        release = " or ".join(_RELEASE_NAMES[config])
        raise DatasetError(
            f"{directory}: no {wanted} file ({', '.join(TABLE_FORMATS)}; `{config}/`, "
            f"`{config}*` or the release's {release})"
        )
    return files


def _read_hub(source: str, config: str, split: str | None) -> list[tuple[str, Iterable[Mapping]]]:
    import datasets

    loaded = load_hub(source, config, split=split)
    if isinstance(loaded, datasets.DatasetDict):
        return [(f"{source} ({config}, {name})", part) for name, part in loaded.items()]
    return [(f"{source} ({config}, {split})", loaded)]


def load_lexam(
    source: str, config: str, split: str | None = None, language: str | None = None
) -> list[LexamItem]:
    """Items of one LEXam `config` from `source`, every row validated.

    `source` is a local file, a local directory (see `_files`) or otherwise a Hub id, loaded with
    `datasets.load_dataset(source, config, split=split)`; a missing local path is never looked
    up on the Hub (`load_hub`). `split` None takes every split (the
    open questions have `dev` and `test`). `language` ("en"/"de") keeps that language's items.
    Ids must be unique across what is loaded.
    """
    n_options = _options_of(config)
    if language not in (None, *LANGUAGES):
        raise ConfigError(f"language must be one of {LANGUAGES} or None, got {language!r}")
    path = Path(source)
    if path.is_dir():
        parts = [(str(file), read_table(file)) for file in _files(path, config, split)]
    elif path.is_file():
        parts = [(str(path), read_table(path))]
    else:
        parts = _read_hub(source, config, split)

    items: list[LexamItem] = []
    seen: dict[str, str] = {}
    for name, rows in parts:
        columns = set(getattr(rows, "column_names", ()))
        keys = (
            (f"{n_options}_choices", f"{n_options}_choices_gold")
            if f"{n_options}_choices" in columns
            else ("choices", "gold")
        )
        for number, row in enumerate(rows, start=1):
            where = f"{name} row {number}"
            item = _item(row, n_options, keys, where)
            check_unique([(item.id, where)], seen=seen)
            items.append(item)
    return [item for item in items if language is None or item.language == language]


def split_by_course(
    items: list[LexamItem], eval_fraction: float, seed: int, max_eval_fraction: float = 0.5
) -> dict[str, list[LexamItem]]:
    """{"train", "test"} with every course wholly on one side (LEXam has no training split, and
    questions of one exam share facts and statements, so a split by question would leak).

    The sorted course names are shuffled with `seed`; whole courses go to test, in that order,
    until test holds at least `eval_fraction` of the items. A course that would take test past
    `max_eval_fraction` stays in train: one dominant course would otherwise become the test set
    and leave almost nothing to train on. Test can then hold less than `eval_fraction`, and
    the split may not depend on the seed. The English MCQ-4 items are such a case: 130 of the
    150 in the shipped sample are the course "Swiss Law" (one exam: all area Interdisciplinary,
    jurisdiction Swiss, year 2019, so area/jurisdiction/year cannot divide it), so with
    eval_fraction 0.2 test is always the 20 questions of "US Business Law", "Chinese Business
    Law" and "Transnational Public Security Law", and train is Swiss Law. Within a side, items
    keep their input order.
    """
    return split_by_group(items, lambda item: item.course, eval_fraction, seed, max_eval_fraction)


def passages(question: str) -> set[str]:
    """The lines of `question` after its first, each without its enumerator ("iii. "),
    case-folded, whitespace collapsed: an MCQ's statements and any `Context:` line. LEXam built
    its MCQs by drawing two to five statements of one original exam question per MCQ (Fan et al.
    2025, sec. 2.1.2), so MCQs that share such a line share that question's facts. The first line
    is the stem and is left out: templated stems ("Which of the following statements is/are
    correct?") are shared by unrelated questions."""
    lines = (_ENUMERATOR.sub("", line.strip()) for line in question.split("\n")[1:])
    return {" ".join(line.casefold().split()) for line in lines} - {""}


def fact_groups(items: Sequence[LexamItem]) -> dict[str, str]:
    """Each item's id -> its fact group, named by the id of the group's first item: items that
    share a passage (`passages`), directly or through other items, are one group."""
    order = {item.id: index for index, item in enumerate(items)}
    parent = {item.id: item.id for item in items}

    def root(name: str) -> str:
        while parent[name] != name:
            name = parent[name]
        return name

    owner: dict[str, str] = {}
    for item in items:
        for passage in passages(item.question):
            first, second = sorted(
                (root(owner.setdefault(passage, item.id)), root(item.id)), key=order.get
            )
            parent[second] = first
    return {item.id: root(item.id) for item in items}


def split_by_facts(
    items: list[LexamItem], eval_fraction: float, seed: int, max_eval_fraction: float = 0.5
) -> dict[str, list[LexamItem]]:
    """{"train", "test"} stratified by course: each course's fact groups (`fact_groups`) are
    split as `split_by_group` splits groups, with `seed`, so both sides hold every course in
    about the same proportion and no question, statement or context straddles the split.

    Why not whole courses (docs/sources.md): the shipped English MCQ-4 sample is 130 questions
    of one course (Swiss Law) and 20 of three others, so the only course split holds out those
    20, and a cheap rule reads them differently. They are single-answer questions recast as
    statement combinations, so their answer is mostly a single statement: the shortest option is
    right on 14 of the 20 (0.70) but on 32 of the 130 Swiss Law questions (0.25). Evaluated
    there, a policy would be scored on a shortcut its training never rewarded. Stratified by
    course, the shortest option is right on 0.31 of train and 0.30 of test (seed 0,
    `eval_fraction` 0.3; 0.26-0.33 of test over seeds 0-5).

    What leaks: test questions share their course, exam, year and question templates with
    training questions, so a held-out score measures unseen questions, not an unseen course.
    What does not: the truth of a statement. The 2019 Swiss Law exam reuses its statements
    across MCQs (95 of its 130 questions are linked by shared statements), so a split by
    question would test statements trained on; that group exceeds `max_eval_fraction` of its
    course and stays in train, and the course's test questions come from its 18 other groups
    (all 35 of their questions at `eval_fraction` 0.3: there only the other courses' questions
    vary with the seed).
    """
    groups = fact_groups(items)
    course: dict[str, str] = {}
    for item in items:
        course.setdefault(groups[item.id], item.course)
    held: set[str] = set()
    for name in sorted(set(course.values())):
        stratum = [item for item in items if course[groups[item.id]] == name]
        part = split_by_group(
            stratum, lambda item: groups[item.id], eval_fraction, seed, max_eval_fraction
        )
        held.update(item.id for item in part["test"])
    return {
        "train": [item for item in items if item.id not in held],
        "test": [item for item in items if item.id in held],
    }
