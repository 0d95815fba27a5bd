"""MASLegalBench loading (Jing et al. 2025, "MASLegalBench: Benchmarking Multi-Agent Systems in
Deductive Legal Reasoning", arXiv:2509.24922; data MIT, github HKUST-KnowComp/MASLegalBench,
`dataset/`).

The release is one `datasets` table of 4,913 rows `{content, type, source}`, `source` being the
case (one of 15 UK ICO GDPR penalty notices) and `type` one of:

| type | rows | content | agent |
|---|---|---|---|
| question | 950 | JSON `{whether_contains_decision, question, options, correct_answer}` | - |
| background | 379 | plain text | facts (F) |
| legal framework | 274 | plain text | legal rules (LR) |
| entity | 1,901 | JSON `{entity_or_concept, legal_alignment, legal_source, rationale}` | AR |
| relation | 1,113 | JSON `{source, relation, target, rationale}` | AR |
| inferred alignment | 296 | JSON like entity | common sense (CS) |

Questions: 647 Yes/No (options `{"Yes": ..., "No": ...}`: the text is "Yes"/"No" for 627 of
them and a full sentence such as "No, the controller remains fully responsible despite
third-party involvement" for 20; both are kept as written) and 303 with options A-D. Answers:
Yes 502, No 145, A 52, B 114, C 106, D 31. `whether_contains_decision` is the string "true" (914)
or "false" (36). One question of `tuckers-mpn-20220228` appears twice, word for word, with the
same answer; both rows are kept.

Chunks are what the role agents retrieve from (the paper's "simulated" agents). A JSON chunk is
rendered as one `key: value` line per field in the row's order, underscores in the key read as
spaces and null fields left out (1,934 rows have no `legal_source`, 6 no `legal_alignment`):

    entity or concept: DPP
    legal alignment: Controller
    rationale: DPP is an organization that experienced a data breach ...

A plain-text chunk is kept as written, less surrounding whitespace. (The official code retrieves
over the raw `content` strings, JSON included; readable lines suit word-level BM25 and prompts
better, and keep every value.) A field that is not in the documented keys (one entity row has a
`legal_alignment_2`) is rendered like the others.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from lexrl.envs.data import read_jsonl, split_by_group, text_field
from lexrl.envs.gdpr.parsing import LABELS, normalise_answer
from lexrl.errors import DatasetError
from lexrl.types import Task

CHUNK_TYPES = ("background", "legal framework", "entity", "relation", "inferred alignment")
ROW_TYPES = ("question", *CHUNK_TYPES)
AGENT_CHUNKS = {
    "F": ("background",),
    "LR": ("legal framework",),
    "AR": ("entity", "relation"),
    "CS": ("inferred alignment",),
}
"""The chunk types each role agent contributes (Jing et al. 2025, sec. 4.2): facts, legal rules,
application / alignment, common sense."""
PRIOR = {"yes_no": "Yes", "abcd": "B"}
"""The majority answer of each kind on the whole release (Yes 502 of 647, B 114 of 303): the
answers of `prior_baseline`."""
COLUMNS = ("content", "type", "source")
_RECORD_KEYS = {
    "entity": ("entity_or_concept", "legal_alignment", "legal_source", "rationale"),
    "inferred alignment": ("entity_or_concept", "legal_alignment", "legal_source", "rationale"),
    "relation": ("source", "relation", "target", "rationale"),
}
_QUESTION_KEYS = ("whether_contains_decision", "question", "options", "correct_answer")
_SAMPLE = "maslegalbench.sample.jsonl"


@dataclass
class Question:
    id: str
    """`<case>#<n>`: the case and the question's 1-based position among that case's questions,
    in the release's row order (stable as long as the release is; the shipped sample, which
    leaves questions out, gives each its release position)."""
    case: str
    question: str
    options: dict[str, str]
    """Label -> option text, in `LABELS[kind]` order. A Yes/No question's labels are "Yes" and
    "No"; their text is as released ("Yes", or a sentence that starts "Yes, ...")."""
    answer: str
    """The correct label, normalised ("Yes", "No", "A".."D")."""
    kind: str
    """"yes_no" or "abcd"."""
    contains_decision: bool
    """The release's `whether_contains_decision`: whether the passage the question was
    extracted from contains a legal decision (a decision-based question, True) or not (an
    opinion-based one; paper, appendix on question extraction)."""


@dataclass
class MasLegalBench:
    questions: list[Question]
    chunks: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """case -> chunk type (`CHUNK_TYPES`, every type present, possibly empty) -> rendered
    chunks in row order (see the module docstring)."""

    def agent_chunks(self, case: str, agents: Iterable[str]) -> list[str]:
        """The chunks the active `agents` (keys of `AGENT_CHUNKS`) hold for `case`, in the order
        of the agents then of `AGENT_CHUNKS`: the union a retriever searches."""
        unknown = [agent for agent in agents if agent not in AGENT_CHUNKS]
        if unknown:
            raise ValueError(f"unknown agent(s) {unknown}; one of {', '.join(AGENT_CHUNKS)}")
        case_chunks = self.chunks.get(case, {})
        return [
            chunk
            for agent in agents
            for chunk_type in AGENT_CHUNKS[agent]
            for chunk in case_chunks.get(chunk_type, [])
        ]


def to_task(question: Question) -> Task:
    """`inputs` holds what the agents may see (the case names the chunks to retrieve from)."""
    return Task(
        id=question.id,
        inputs={
            "question": question.question,
            "options": question.options,
            "kind": question.kind,
            "case": question.case,
        },
        gold=question.answer,
        meta={
            "case": question.case,
            "kind": question.kind,
            "contains_decision": question.contains_decision,
        },
    )


def default_sample() -> Path:
    """The attributed 6-case sample shipped beside this module, its Yes/No questions balanced
    within each case (`sample/README.md`, `make_sample`)."""
    return Path(str(resources.files("lexrl.envs.gdpr") / "sample" / _SAMPLE))


def _rows(source: str) -> tuple[str, Iterable[Mapping]]:
    """A name for messages and the rows of `source` (see `load_maslegalbench`)."""
    path = default_sample() if source == "sample" else Path(source).expanduser()
    if path.is_file() and path.suffix == ".jsonl":
        return str(path), read_jsonl(path, required=COLUMNS)
    if not path.is_dir() and (
        source == "sample"
        or path.exists()
        or path.suffix == ".jsonl"
        or source.startswith((".", "/", "~"))
    ):
        raise DatasetError(f"not a MASLegalBench folder or JSONL file: {path}")

    import datasets

    if path.is_dir():
        try:
            loaded = datasets.load_from_disk(str(path))
        except (FileNotFoundError, ValueError) as error:
            raise DatasetError(f"{path}: not a `datasets` save_to_disk folder ({error})") from None
        name = str(path)
        if isinstance(loaded, datasets.DatasetDict):
            if "train" not in loaded:
                raise DatasetError(f"{path}: no `train` split (splits: {', '.join(loaded)})")
            loaded, name = loaded["train"], f"{path} (train)"
    else:
        loaded, name = datasets.load_dataset(source, split="train"), f"{source} (train)"
    missing = [column for column in COLUMNS if column not in loaded.column_names]
    if missing:
        raise DatasetError(f"{name}: missing column(s) {', '.join(missing)}")
    return name, loaded


def _json_record(content: str, keys: tuple[str, ...], where: str) -> dict:
    try:
        record = json.loads(content)
    except json.JSONDecodeError as error:
        raise DatasetError(f"{where}: `content` is not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: `content` is not a JSON object: {content[:80]!r}")
    missing = [key for key in keys if key not in record]
    if missing:
        raise DatasetError(f"{where}: `content` lacks field(s) {', '.join(missing)}")
    return record


def _render(record: dict, where: str) -> str:
    lines = []
    for key, value in record.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if not isinstance(value, str):
            raise DatasetError(f"{where}: `content` field `{key}` is not a string: {value!r:.80}")
        lines.append(f"{key.replace('_', ' ')}: {value.strip()}")
    if not lines:
        raise DatasetError(f"{where}: `content` has no non-empty field")
    return "\n".join(lines)


def _contains_decision(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise DatasetError(
        f"{where}: `content` field `whether_contains_decision` is not true/false: {value!r:.80}"
    )


def _options(record: dict, where: str) -> tuple[str, dict[str, str]]:
    """The kind and the options in label order. An empty `options` is read as a Yes/No question
    with options "Yes" and "No" when the answer is Yes or No (a terse form of the release's)."""
    options = record["options"]
    if not isinstance(options, dict):
        raise DatasetError(f"{where}: `content` field `options` is not an object: {options!r:.80}")
    if not options and normalise_answer(str(record["correct_answer"]), "yes_no"):
        options = {"Yes": "Yes", "No": "No"}
    kind = next((kind for kind, labels in LABELS.items() if set(options) == set(labels)), None)
    if kind is None:
        kinds = " or ".join(", ".join(labels) for labels in LABELS.values())
        raise DatasetError(
            f"{where}: `content` field `options` has labels {', '.join(map(str, options))}; "
            f"expected {kinds}"
        )
    for label, text in options.items():
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(f"{where}: `content` field `options.{label}` is not a text")
    return kind, {label: options[label].strip() for label in LABELS[kind]}


def _number(value: object, counted: int, where: str) -> int:
    """A question row's `number` (its position among its case's questions in the release, kept
    by a sample that leaves questions out), or `counted`, its position in `source`, without."""
    if value is None:
        return counted
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DatasetError(f"{where}: `number` is not a positive integer: {value!r:.80}")
    return value


def _question(content: str, case: str, number: int, where: str) -> Question:
    record = _json_record(content, _QUESTION_KEYS, where)
    kind, options = _options(record, where)
    raw_answer = record["correct_answer"]
    answer = normalise_answer(raw_answer, kind) if isinstance(raw_answer, str) else None
    if answer is None:
        raise DatasetError(
            f"{where}: `content` field `correct_answer` {raw_answer!r:.80} is not one of "
            f"{', '.join(options)}"
        )
    return Question(
        id=f"{case}#{number}",
        case=case,
        question=text_field(record, "question", f"{where} `content`").strip(),
        options=options,
        answer=answer,
        kind=kind,
        contains_decision=_contains_decision(record["whether_contains_decision"], where),
    )


def load_maslegalbench(source: str) -> MasLegalBench:
    """Questions and chunks of MASLegalBench from `source`, every row validated.

    `source` is `"sample"` (the 6-case sample shipped in the package, `default_sample()`), a
    JSONL file of `{content, type, source}` rows (the sample's form; a question row may add
    `number`, its position among its case's questions in the release, which then names it
    instead of its position in the file), a `datasets` save_to_disk
    folder (the release's `dataset/` with its `train/` split, or the split's folder itself), or
    otherwise a Hub id loaded with `datasets.load_dataset(source, split="train")`. The release is
    the GitHub repository's `dataset/` folder (the authors' code reads it with `load_from_disk`);
    no Hub copy is known to lexrl, so a Hub id is one the user supplies. A row with an unknown
    `type` or a malformed `content`, or a question whose id repeats an earlier one's, raises
    DatasetError naming the source, the row (counted from 1) and the field.
    """
    name, rows = _rows(source)
    questions: list[Question] = []
    chunks: dict[str, dict[str, list[str]]] = {}
    per_case: Counter[str] = Counter()
    ids: dict[str, int] = {}
    for row_number, row in enumerate(rows, start=1):
        where = f"{name} row {row_number}"
        row_type = text_field(row, "type", where)
        case = text_field(row, "source", where).strip()
        content = text_field(row, "content", where)
        if row_type not in ROW_TYPES:
            raise DatasetError(
                f"{where}: unknown `type` {row_type!r}; one of {', '.join(ROW_TYPES)}"
            )
        case_chunks = chunks.setdefault(case, {chunk_type: [] for chunk_type in CHUNK_TYPES})
        if row_type == "question":
            per_case[case] += 1
            number = _number(row.get("number"), per_case[case], where)
            question = _question(content, case, number, where)
            if question.id in ids:
                raise DatasetError(
                    f"{where}: question id {question.id} is also that of row {ids[question.id]}"
                )
            ids[question.id] = row_number
            questions.append(question)
        elif row_type in _RECORD_KEYS:
            record = _json_record(content, _RECORD_KEYS[row_type], where)
            case_chunks[row_type].append(_render(record, where))
        else:
            case_chunks[row_type].append(content.strip())
    if not questions:
        raise DatasetError(f"{name}: no question rows")
    return MasLegalBench(questions=questions, chunks=chunks)


def split_by_case(
    questions: Sequence[Question],
    eval_fraction: float,
    seed: int,
    max_eval_fraction: float | None = None,
) -> dict[str, list[Question]]:
    """{"train", "test"} with every case wholly on one side (MASLegalBench has no split, and the
    questions of one penalty notice share its facts and chunks, so a split by question leaks).

    `lexrl.envs.data.split_by_group` with the case as the group: cases in a seeded order go to
    test until it holds `eval_fraction` of the questions, skipping a case that would take it
    past `max_eval_fraction`. The cases are very unequal: `23andme-penalty-notice` alone holds
    252 of the 950 questions (26.5%), the next largest 77. With the generic cap of 0.5, a seed
    that draws 23andme late gives a test set near half the data (eval_fraction 0.3, 1,000
    seeds: test 285 to 473 questions, 23andme in test for 346). The default cap here is
    therefore `eval_fraction + 0.05`, which keeps test within 5 points of the target (same
    seeds: 285 to 332 questions); 23andme can still land in test (158 of the 1,000 seeds at
    0.3; never at 0.2, where it exceeds the cap), and the test set is then at least 76% that
    one notice: report per-case accuracy beside the mean. Measured on the whole release,
    eval_fraction 0.3, seed 0: train 660, test 290 (6 cases: advanced, cabinet-office,
    clearview, marriott, mermaids, psni; 23andme in train). Train keeps the questions' order;
    test is `interleaved`, so that the first tasks an `eval.max_tasks` keeps are a fair slice.
    """
    if max_eval_fraction is None:
        max_eval_fraction = eval_fraction + 0.05
    split = split_by_group(
        questions, lambda question: question.case, eval_fraction, seed, max_eval_fraction
    )
    return {"train": split["train"], "test": interleaved(split["test"])}


def interleaved(questions: Sequence[Question]) -> list[Question]:
    """`questions` reordered so that every prefix holds about the whole's share of each case and
    each answer: the i-th (from 0) of the n questions with one case and answer is placed at
    (i + 1/2) / n of the way, ties in the order those groups first appear. In row order, the
    first 30 questions of a test split are those of its first case alone, in whatever order of
    answers the release wrote them."""
    groups: dict[tuple[str, str], list[Question]] = {}
    for question in questions:
        groups.setdefault((question.case, question.answer), []).append(question)
    placed = [
        ((i + 0.5) / len(members), group, question)
        for group, members in enumerate(groups.values())
        for i, question in enumerate(members)
    ]
    return [question for *_, question in sorted(placed, key=lambda item: item[:2])]


def label_counts(questions: Iterable[Question]) -> dict[str, int]:
    """How often each label is the answer, every label of both kinds listed (Yes, No, A-D)."""
    counts = Counter(question.answer for question in questions)
    return {label: counts[label] for labels in LABELS.values() for label in labels}


def _mean(values: list[float]) -> float:
    if not values:
        raise ValueError("no questions: a baseline of an empty set is undefined")
    return sum(values) / len(values)


def random_baseline(questions: Sequence[Question]) -> float:
    """Expected accuracy of a uniform guess: the mean over questions of 1 / number of options
    (1/2 for Yes/No, 1/4 for A-D). 0.4203 on the whole release (the paper's Table 2: 42.03%)."""
    return _mean([1 / len(question.options) for question in questions])


def prior_baseline(questions: Sequence[Question]) -> float:
    """Accuracy of always answering the majority label of the kind (`PRIOR`: "Yes" on Yes/No,
    "B" on A-D). 0.6484 on the whole release (the paper reports no such baseline)."""
    return _mean([float(question.answer == PRIOR[question.kind]) for question in questions])


def stats(data: MasLegalBench) -> dict:
    """Counts and baselines of `data`, JSON-ready: questions, yes_no, abcd, labels, the two
    baselines as fractions and percentages (2 decimals), questions per case and chunks per
    type."""
    questions = data.questions
    kinds = Counter(question.kind for question in questions)
    random_score, prior_score = random_baseline(questions), prior_baseline(questions)
    return {
        "questions": len(questions),
        "yes_no": kinds["yes_no"],
        "abcd": kinds["abcd"],
        "labels": label_counts(questions),
        "random_baseline": random_score,
        "random_baseline_pct": round(100 * random_score, 2),
        "prior_baseline": prior_score,
        "prior_baseline_pct": round(100 * prior_score, 2),
        "cases": dict(Counter(question.case for question in questions)),
        "chunks": {
            chunk_type: sum(len(case[chunk_type]) for case in data.chunks.values())
            for chunk_type in CHUNK_TYPES
        },
    }
