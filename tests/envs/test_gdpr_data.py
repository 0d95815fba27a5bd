"""MASLegalBench loading, validation, split by case and baselines, on a fixture built here, on the
shipped sample and (when ../shared is there) on the whole release."""

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import datasets
import pytest

from lexrl.envs.gdpr.data import (
    AGENT_CHUNKS,
    CHUNK_TYPES,
    default_sample,
    interleaved,
    label_counts,
    load_maslegalbench,
    prior_baseline,
    random_baseline,
    split_by_case,
    stats,
    to_task,
)
from lexrl.envs.gdpr.make_sample import sample_rows
from lexrl.errors import DatasetError

ROOT = Path(__file__).parents[2]
RELEASE = ROOT.parent / "shared" / "data" / "maslegalbench" / "dataset"
needs_release = pytest.mark.skipif(
    not RELEASE.is_dir(),
    reason=f"MASLegalBench not found at {RELEASE} (../shared/data/maslegalbench)",
)
YES_NO = {"Yes": "Yes", "No": "No"}
ABCD = {"A": "first", "B": "second", "C": "third", "D": "fourth"}


def _question(answer: str, options: dict, text: str = "Was Article 32 infringed?") -> str:
    return json.dumps(
        {
            "whether_contains_decision": "true",
            "question": text,
            "options": options,
            "correct_answer": answer,
        }
    )


def _entity(name: str, source: str | None = None) -> str:
    return json.dumps(
        {
            "entity_or_concept": name,
            "legal_alignment": "Controller",
            "legal_source": source,
            "rationale": f"{name} decides the purposes of processing",
        }
    )


def _rows() -> list[dict]:
    """Two cases; answers Yes, No, B, C (case a) and Yes, A (case b)."""
    relation = {"source": "Acme", "relation": "engaged", "target": "a processor", "rationale": "r"}
    return [
        {"content": "1. Acme ran a web shop.\n", "type": "background", "source": "a"},
        {"content": "2. Article 32 UK GDPR.", "type": "legal framework", "source": "a"},
        {"content": _entity("Acme"), "type": "entity", "source": "a"},
        {"content": json.dumps(relation), "type": "relation", "source": "a"},
        {"content": _entity("passwords", "Art. 4(1)"), "type": "inferred alignment", "source": "a"},
        {"content": _question("Yes", YES_NO), "type": "question", "source": "a"},
        {"content": _question("No", YES_NO), "type": "question", "source": "a"},
        {"content": _question("B", ABCD), "type": "question", "source": "a"},
        {"content": _question("C", ABCD), "type": "question", "source": "a"},
        {"content": "Bee kept records.", "type": "background", "source": "b"},
        {"content": _question("Yes", YES_NO), "type": "question", "source": "b"},
        {"content": _question("A", ABCD), "type": "question", "source": "b"},
    ]


def _save(path: Path, rows: list[dict], as_dict: bool = True) -> str:
    table = datasets.Dataset.from_list(rows)
    (datasets.DatasetDict({"train": table}) if as_dict else table).save_to_disk(str(path))
    return str(path)


def test_fixture_loads_with_ids_kinds_and_rendered_chunks(tmp_path):
    data = load_maslegalbench(_save(tmp_path / "release", _rows()))
    assert [q.id for q in data.questions] == ["a#1", "a#2", "a#3", "a#4", "b#1", "b#2"]
    assert [q.kind for q in data.questions] == ["yes_no"] * 2 + ["abcd"] * 2 + ["yes_no", "abcd"]
    assert data.questions[2].options == ABCD
    assert data.questions[0].contains_decision is True
    assert set(data.chunks) == {"a", "b"}
    assert all(set(chunks) == set(CHUNK_TYPES) for chunks in data.chunks.values())
    assert data.chunks["a"]["background"] == ["1. Acme ran a web shop."]
    assert data.chunks["a"]["entity"] == [
        "entity or concept: Acme\nlegal alignment: Controller\n"
        "rationale: Acme decides the purposes of processing"
    ]
    assert data.chunks["a"]["inferred alignment"][0].splitlines()[2] == "legal source: Art. 4(1)"
    assert data.chunks["a"]["relation"] == [
        "source: Acme\nrelation: engaged\ntarget: a processor\nrationale: r"
    ]
    assert data.chunks["b"]["entity"] == []
    task = to_task(data.questions[2])
    assert task.id == "a#3" and task.gold == "B"
    assert task.inputs["options"] == ABCD and task.inputs["case"] == "a"
    assert "answer" not in json.dumps(task.inputs)


def test_dataset_folder_and_jsonl_sources_load_the_same(tmp_path):
    whole = load_maslegalbench(_save(tmp_path / "dict", _rows()))
    split = load_maslegalbench(_save(tmp_path / "table", _rows(), as_dict=False))
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in _rows()), encoding="utf-8")
    assert whole == split == load_maslegalbench(str(jsonl))


def test_baselines_match_a_hand_computation(tmp_path):
    questions = load_maslegalbench(_save(tmp_path / "release", _rows())).questions
    # 1/2 + 1/2 + 1/4 + 1/4 (case a) + 1/2 + 1/4 (case b), over 6 questions.
    assert random_baseline(questions) == pytest.approx(2.25 / 6)
    # "Yes" right on a#1 and b#1, "B" right on a#3.
    assert prior_baseline(questions) == pytest.approx(3 / 6)
    assert label_counts(questions) == {"Yes": 2, "No": 1, "A": 1, "B": 1, "C": 1, "D": 0}
    with pytest.raises(ValueError, match="no questions"):
        random_baseline([])


def test_stats_of_the_fixture(tmp_path):
    result = stats(load_maslegalbench(_save(tmp_path / "release", _rows())))
    assert result["questions"] == 6 and result["yes_no"] == 3 and result["abcd"] == 3
    assert result["random_baseline_pct"] == 37.5 and result["prior_baseline_pct"] == 50.0
    assert result["cases"] == {"a": 4, "b": 2}
    assert result["chunks"] == {
        "background": 2,
        "legal framework": 1,
        "entity": 1,
        "relation": 1,
        "inferred alignment": 1,
    }


def test_an_empty_options_object_is_a_yes_no_question(tmp_path):
    rows = [{"content": _question("no", {}), "type": "question", "source": "a"}]
    question = load_maslegalbench(_save(tmp_path / "release", rows)).questions[0]
    assert (question.kind, question.options, question.answer) == ("yes_no", YES_NO, "No")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"type": "verdict"}, r"row 3: unknown `type` 'verdict'"),
        ({"content": "  "}, r"row 3: missing field `content`"),
        ({"content": "{not json"}, r"row 3: `content` is not valid JSON"),
        ({"content": _question("E", ABCD)}, r"row 3: `content` field `correct_answer` 'E'"),
        ({"content": _question("A", YES_NO)}, r"row 3: `content` field `correct_answer` 'A'"),
        ({"content": _question("Yes", {"A": "x", "B": "y"})}, r"row 3: `content` field `options`"),
        ({"content": _question("Yes", ["Yes", "No"])}, r"row 3: `content` field `options`"),
        ({"content": _question("A", {**ABCD, "B": ""})}, r"row 3: `content` field `options.B`"),
        (
            {"content": _question("Yes", YES_NO, text="")},
            r"row 3 `content`: missing field `question`",
        ),
        ({"content": json.dumps({"question": "q"})}, r"row 3: `content` lacks field\(s\) whether_"),
        (
            {"content": _question("Yes", YES_NO).replace('"true"', '"maybe"')},
            r"row 3: `content` field `whether_contains_decision`",
        ),
        ({"type": "entity", "content": json.dumps({"source": "x"})}, r"row 3: `content` lacks"),
        (
            {"type": "relation", "content": _entity("Acme")},
            r"row 3: `content` lacks field\(s\) source",
        ),
        (
            {"type": "entity", "content": _entity("Acme").replace('"Controller"', "[1]")},
            r"row 3: `content` field `legal_alignment` is not a string",
        ),
        ({"type": "relation", "content": '"a string"'}, r"row 3: `content` is not a JSON object"),
    ],
)
def test_malformed_rows_name_the_row_and_the_field(tmp_path, row, message):
    good = {"content": _question("Yes", YES_NO), "type": "question", "source": "a"}
    rows = [good, good, {**good, **row}]
    path = _save(tmp_path / "release", rows)
    with pytest.raises(DatasetError, match=message) as error:
        load_maslegalbench(path)
    assert str(error.value).startswith(f"{path} (train) row 3")


def test_missing_sources_and_columns_are_named(tmp_path):
    with pytest.raises(DatasetError, match="not a MASLegalBench folder or JSONL file"):
        load_maslegalbench(str(tmp_path / "absent"))
    with pytest.raises(DatasetError, match="not a `datasets` save_to_disk folder"):
        load_maslegalbench(str(tmp_path))
    path = _save(tmp_path / "release", [{"content": "x", "type": "background"}])
    with pytest.raises(DatasetError, match=r"missing column\(s\) source"):
        load_maslegalbench(path)
    with pytest.raises(DatasetError, match="no question rows"):
        load_maslegalbench(_save(tmp_path / "chunks", [_rows()[0]]))


def test_agent_chunks():
    assert AGENT_CHUNKS == {
        "F": ("background",),
        "LR": ("legal framework",),
        "AR": ("entity", "relation"),
        "CS": ("inferred alignment",),
    }
    assert sorted(t for types in AGENT_CHUNKS.values() for t in types) == sorted(CHUNK_TYPES)


def test_agent_chunks_are_the_union_of_the_active_agents_for_one_case(tmp_path):
    data = load_maslegalbench(_save(tmp_path / "release", _rows()))
    assert data.agent_chunks("a", ["F", "LR"]) == [
        "1. Acme ran a web shop.",
        "2. Article 32 UK GDPR.",
    ]
    assert len(data.agent_chunks("a", ["AR"])) == 2
    assert data.agent_chunks("b", ["F", "LR", "AR", "CS"]) == ["Bee kept records."]
    with pytest.raises(ValueError, match="unknown agent"):
        data.agent_chunks("a", ["judge"])


def _many_cases(seed: int) -> list:
    rng = random.Random(seed)
    rows = [
        {"content": _question("Yes", YES_NO), "type": "question", "source": f"case{case}"}
        for case in range(15)
        for _ in range(rng.choice([3, 5, 8, 40]))
    ]
    return rows


def test_split_never_shares_a_case(tmp_path):
    questions = load_maslegalbench(_save(tmp_path / "release", _many_cases(0))).questions
    for seed in range(50):
        for eval_fraction in (0.1, 0.2, 0.3):
            split = split_by_case(questions, eval_fraction, seed)
            train = {q.case for q in split["train"]}
            test = {q.case for q in split["test"]}
            assert not train & test and split["test"]
            assert len(split["train"]) + len(split["test"]) == len(questions)
            assert len(split["test"]) <= (eval_fraction + 0.05) * len(questions)


def test_the_shipped_sample_loads():
    assert default_sample().is_file()
    assert (default_sample().parent / "LICENSE_DATA").read_text().count("HKUST-KnowComp") >= 2
    data = load_maslegalbench("sample")
    result = stats(data)
    assert result["questions"] == 198 and result["yes_no"] == 104 and result["abcd"] == 94
    assert result["labels"] == {"Yes": 52, "No": 52, "A": 16, "B": 41, "C": 28, "D": 9}
    assert len(data.chunks) == 6
    assert all(all(chunks[t] for t in CHUNK_TYPES) for chunks in data.chunks.values())
    assert default_sample().stat().st_size < 450_000
    split = split_by_case(data.questions, 0.3, 0)
    assert not {q.case for q in split["train"]} & {q.case for q in split["test"]}


def test_sample_rows_balance_each_cases_yes_no_and_keep_the_rest_in_order():
    rows = _rows() + [
        {"content": _question("Yes", YES_NO, f"Q{i}?"), "type": "question", "source": "a"}
        for i in range(5)
    ]
    kept = sample_rows(rows, ["a", "b"], seed=0)
    assert kept == sample_rows(rows, ["a", "b"], seed=0)
    questions = [row for row in kept if row["type"] == "question"]
    answers = {(row["source"], json.loads(row["content"])["correct_answer"]) for row in questions}
    # Case a: 1 No, so 1 of its 6 Yes; case b: no No, so none of its Yes; every A-D kept.
    assert sorted(json.loads(row["content"])["correct_answer"] for row in questions) == [
        "A", "B", "C", "No", "Yes",
    ]  # fmt: skip
    assert ("b", "Yes") not in answers
    assert [row for row in kept if row["type"] != "question"] == [
        row for row in rows if row["type"] != "question"
    ]
    numbers = [row["number"] for row in questions if row["source"] == "a"]
    assert numbers == sorted(numbers) and {2, 3, 4} <= set(numbers)
    assert sample_rows(rows, ["b"], seed=0)[1:] == [{**rows[-6], "number": 2}]


def test_a_rows_number_names_the_question_and_a_repeated_id_is_an_error(tmp_path):
    rows = [{**row, "number": 10 + i} for i, row in enumerate(_rows())]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert [q.id for q in load_maslegalbench(str(path)).questions] == [
        "a#15", "a#16", "a#17", "a#18", "b#20", "b#21",
    ]  # fmt: skip
    for number, message in ((0, "positive integer"), ("3", "positive integer"), (1, "a#1")):
        bad = [*_rows()[:6], {**_rows()[6], "number": number}]
        path.write_text("".join(json.dumps(row) + "\n" for row in bad), encoding="utf-8")
        with pytest.raises(DatasetError, match=f"row 7: .*{message}"):
            load_maslegalbench(str(path))


def test_every_prefix_of_an_interleaved_split_mixes_cases_and_answers(tmp_path):
    rows = [
        {"content": _question(answer, YES_NO), "type": "question", "source": case}
        for case in ("a", "b")
        for answer in ["Yes"] * 10 + ["No"] * 10
    ]
    questions = load_maslegalbench(_save(tmp_path / "release", rows)).questions
    ordered = interleaved(questions)
    assert sorted(q.id for q in ordered) == sorted(q.id for q in questions)
    for end in range(4, len(ordered) + 1, 4):
        prefix = Counter((q.case, q.answer) for q in ordered[:end])
        assert set(prefix.values()) == {end // 4}, end
    split = split_by_case(questions, 0.45, 0)
    in_row_order = [q for q in questions if q.case == split["test"][0].case]
    assert split["test"] == interleaved(in_row_order) != in_row_order


@needs_release
def test_the_release_counts_and_baselines():
    data = load_maslegalbench(str(RELEASE))
    result = stats(data)
    assert result["questions"] == 950 and result["yes_no"] == 647 and result["abcd"] == 303
    assert result["labels"] == {"Yes": 502, "No": 145, "A": 52, "B": 114, "C": 106, "D": 31}
    assert f"{100 * random_baseline(data.questions):.2f}" == "42.03"
    assert f"{100 * prior_baseline(data.questions):.2f}" == "64.84"
    assert (result["random_baseline_pct"], result["prior_baseline_pct"]) == (42.03, 64.84)
    assert len(result["cases"]) == 15 and result["cases"]["23andme-penalty-notice"] == 252
    assert result["chunks"] == {
        "background": 379,
        "legal framework": 274,
        "entity": 1901,
        "relation": 1113,
        "inferred alignment": 296,
    }
    assert len({q.id for q in data.questions}) == 950


@needs_release
def test_the_release_split_by_case():
    questions = load_maslegalbench(str(RELEASE / "train")).questions
    split = split_by_case(questions, 0.3, 0)
    assert (len(split["train"]), len(split["test"])) == (660, 290)
    for seed in range(100):
        split = split_by_case(questions, 0.3, seed)
        assert not {q.case for q in split["train"]} & {q.case for q in split["test"]}
        assert 285 <= len(split["test"]) <= 332


@needs_release
def test_make_sample_regenerates_the_shipped_sample(tmp_path):
    out = tmp_path / "sample.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "lexrl.envs.gdpr.make_sample",
         "--source", str(RELEASE), "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert out.read_bytes() == default_sample().read_bytes()
    assert json.loads(result.stdout)["questions"] == 198


@needs_release
def test_the_sample_keeps_the_releases_ids_and_questions():
    release = {q.id: q for q in load_maslegalbench(str(RELEASE)).questions}
    for question in load_maslegalbench("sample").questions:
        assert release[question.id] == question
