"""The LEXam authors' MCQ scorer (`authors_mcq_answer`, their lighteval `sample_level_acc`)
beside the reward's parser on hand-made replies, the report's two accuracies, and the loader
finding the release's own file names."""

import pandas as pd
import pytest

from lexrl.envs.lexam.data import load_lexam
from lexrl.envs.lexam.metrics import (
    authors_mcq_answer,
    final_answer,
    markdown_breakdown,
    mcq_metrics,
    mcq_record,
)
from lexrl.envs.lexam.reward import parse_mcq_answer_lexam_parity
from lexrl.envs.mcq import parse_mcq_answer
from lexrl.types import Task, Trajectory, Turn

# (reply, option count, the authors' answer, the reward parser's answer), worked out by hand:
# theirs is re.findall's last non-overlapping match in the raw reply; ours the overlapping
# candidate that ends last, after the last </think>.
CASES = [
    ("Correct Answer: ###C###", 4, 2, 2),
    ("I first thought ###B###, but the answer is ###D###.", 4, 3, 3),
    # overlapping markers: findall resumes after `###A###`, so `B###` is no match for it
    ("###A###B###", 4, 0, 1),
    ("###A###B###C###", 4, 2, 2),  # A, then C from `###C###`; ours ends on C too
    ("###A###B###C###D###", 4, 2, 3),  # A and C for them, D ends last for us
    ("###A######B###", 4, 1, 1),  # two separate markers
    ("####B####", 4, 1, 1),
    # thinking: they read it, we drop it
    ("<think>Is it ###B###?</think>Correct Answer: ###C###", 4, 2, 2),
    ("<think>It is ###B###.</think>I am not sure.", 4, 1, None),
    ("<think>The answer is ###A###", 4, 0, 0),  # cut off while thinking: nothing to drop
    ("Correct Answer: ###C###</think>", 4, 2, None),
    # lowercase, spaces, missing or out-of-range labels
    ("Correct Answer: ###c###", 4, None, None),
    ("Correct Answer: ### C ###", 4, None, None),
    ("The answer is C.", 4, None, None),
    ("", 4, None, None),
    ("###AB###", 4, None, None),
    ("###E###", 4, None, None),
    ("###E###", 8, 4, 4),
    ("###B### then ###E###", 4, 1, 1),
    # numbered options above 26
    ("Correct Answer: ###12###", 32, 11, 11),
    ("###03###", 32, None, None),
    ("###33###", 32, None, None),
    ("###1###2###", 32, 0, 1),
]


@pytest.mark.parametrize(("reply", "n_options", "authors", "ours"), CASES)
def test_authors_scorer_beside_the_reward_parser(reply, n_options, authors, ours):
    assert authors_mcq_answer(reply, n_options) == authors
    assert parse_mcq_answer(reply, n_options) == ours


@pytest.mark.parametrize(("reply", "n_options", "authors", "ours"), CASES)
def test_with_four_options_it_is_their_regex_exactly(reply, n_options, authors, ours):
    if n_options == 4:
        assert authors_mcq_answer(reply) == parse_mcq_answer_lexam_parity(reply) == authors


def task(gold=2, n_options=4, language="en"):
    return Task("q", {}, gold, {"n_options": n_options, "language": language})


def episode(*answers, roles=None):
    roles = roles or ["examinee"] * len(answers)
    turns = [Turn(role, [], [], [], text, 0) for role, text in zip(roles, answers, strict=True)]
    predicted = parse_mcq_answer(answers[-1], 4)
    return Trajectory("q", turns=turns, outcome={"predicted": predicted})


def test_the_scored_answer_is_the_last_examinee_or_reviewer_turn():
    reviewed = episode("###A###", "###C###", roles=["examinee", "reviewer"])
    assert final_answer(reviewed) == "###C###"
    assert final_answer(Trajectory("q")) is None
    assert mcq_record(task(), reviewed) == {
        "gold": 2,
        "predicted": 2,
        "authors_predicted": 2,
        "language": "en",
        "n_options": 4,
    }


def test_report_gives_the_authors_accuracy_as_the_papers_number():
    replies = [
        "Correct Answer: ###C###",  # both right
        "###C###A###",  # theirs C (right), ours A
        "###A###C###",  # theirs A, ours C (right)
        "<think>###C###</think>no marker",  # theirs right, ours unparsed
        "no marker",  # neither parsed
    ]
    records = [mcq_record(task(), episode(reply)) for reply in replies]
    assert [r["authors_predicted"] for r in records] == [2, 2, 0, 2, None]
    assert [r["predicted"] for r in records] == [2, 0, 2, None, None]
    metrics = mcq_metrics(records)
    assert metrics["accuracy_authors"]["mean"] == pytest.approx(0.6)
    assert metrics["accuracy"]["mean"] == pytest.approx(0.4)
    assert metrics["parse_rate_authors"] == pytest.approx(0.8)
    assert metrics["parse_rate"] == pytest.approx(0.6)
    assert metrics["by_n_options"][4]["accuracy_authors"]["mean"] == pytest.approx(0.6)
    text = markdown_breakdown(metrics)
    assert "accuracy, authors' scorer (paper)" in text and "accuracy, reward's parser" in text
    # records without the authors' field: the former single column
    legacy = mcq_metrics(
        [{k: v for k, v in r.items() if k != "authors_predicted"} for r in records]
    )
    assert "accuracy_authors" not in legacy
    assert "authors' scorer" not in markdown_breakdown(legacy)


ROW = {"question": "Q?", "course": "Swiss Law", "language": "en", "area": "Private"}


def _release(folder):
    folder.mkdir(parents=True, exist_ok=True)
    test = [
        {**ROW, "id": f"t{i}", "choices": repr(["a", "b", "c", "d"]), "gold": str(i)}
        for i in range(3)
    ]
    pd.DataFrame(test).to_excel(folder / "MCQs_test.xlsx", index=False, engine="openpyxl")
    perturbed = [
        {
            **ROW,
            "id": "p1",
            "4_choices": repr(["a", "b", "c", "d"]),
            "4_choices_gold": "1",
            "8_choices": repr([str(i) for i in range(8)]),
            "8_choices_gold": "6",
        }
    ]
    path = folder / "MCQs_test_perturbation.xlsx"
    pd.DataFrame(perturbed).to_excel(path, index=False, engine="openpyxl")


@pytest.mark.parametrize("inside", ["", "data"])
def test_the_loader_finds_the_release_file_names_in_a_folder(tmp_path, inside):
    _release(tmp_path / inside if inside else tmp_path)
    four = load_lexam(str(tmp_path), "mcq_4_choices")
    assert [(item.id, item.gold) for item in four] == [("t0", 0), ("t1", 1), ("t2", 2)]
    assert [item.id for item in load_lexam(str(tmp_path), "mcq_4_choices", split="test")] == [
        "t0",
        "t1",
        "t2",
    ]
    (eight,) = load_lexam(str(tmp_path), "mcq_8_choices")
    assert (eight.id, eight.gold, eight.n_options) == ("p1", 6, 8)


def test_config_named_files_come_before_the_release_names(tmp_path):
    _release(tmp_path)
    row = {**ROW, "id": "own", "choices": ["a", "b", "c", "d"], "gold": 0}
    pd.DataFrame([row]).to_json(tmp_path / "mcq_4_choices.jsonl", orient="records", lines=True)
    assert [item.id for item in load_lexam(str(tmp_path), "mcq_4_choices")] == ["own"]


def test_a_folder_without_any_names_them_in_the_error(tmp_path):
    from lexrl.errors import DatasetError

    with pytest.raises(DatasetError, match="MCQs_test_perturbation.xlsx"):
        load_lexam(str(tmp_path), "mcq_16_choices")
