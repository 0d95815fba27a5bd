"""LEXam's degenerate policies: each picks what it claims from the prompt alone, and none earns
more than `SHARE_BOUND` of the scripted teacher's reward on the shipped samples' test splits."""

import dataclasses
import random
from pathlib import Path

import pytest

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.envs.lexam.degenerate import lexam_policies, question_and_options, question_text
from lexrl.envs.mcq import format_choices
from lexrl.eval.audit import SHARE_BOUND, TEACHER, audit_env
from lexrl.types import Task

ROOT = Path(__file__).resolve().parents[2]
STEM = "Which statements on the contract of sale are correct?\ni. A sale binds.\nii. A gift binds."
CHOICES = ["the contract of sale", "an oral promise", "none of the statements here indeed", "rain"]
TASK = Task(id="t", inputs={}, gold=0, meta={})


def prompt(stem: str, choices: list[str]) -> str:
    """The examinee's message as `LexamEnv.run_episode` writes it."""
    return f"Question: {stem}{format_choices(choices)}\nAnswer:"


def reply(name: str, text: str, brief: bool = True, task: Task = TASK, seed: int = 0) -> str:
    factory = lexam_policies(open_question=False, brief=brief, policy_judge=False)[name]
    return factory(task, random.Random(seed))("examinee", [{"role": "user", "content": text}])


def test_the_prompt_splits_into_the_question_and_its_options():
    assert question_and_options(prompt(STEM, CHOICES)) == (STEM, CHOICES)
    draft = f"Question: {STEM}{format_choices(CHOICES)}\n\nDraft answer:\n###A###\nA. no"
    assert question_and_options(draft) == (STEM, CHOICES)
    many = [f"choice {i}" for i in range(30)]
    assert question_and_options(prompt("Q?\nA. an enumerated part", many)) == (
        "Q?\nA. an enumerated part",
        many,
    )
    assert question_and_options(prompt("Open?", [])) == ("Open?", [])
    assert question_text(prompt("Open?\nA. part", [])) == "Open?\nA. part"


@pytest.mark.parametrize(
    ("name", "picked"),
    [
        ("shortest_option", "D"),  # "rain"
        ("longest_option", "C"),  # "none of the statements here indeed"
        ("most_overlap_with_question", "A"),  # 4 words of the question; C 3
        ("least_overlap_with_question", "B"),  # B and D share no word with it: the first
    ],
)
def test_each_rule_picks_the_option_it_names(name, picked):
    assert reply(name, prompt(STEM, CHOICES)) == f"###{picked}###"
    assert reply(name, prompt(STEM, CHOICES), brief=False) == f"Correct Answer: ###{picked}###"


def test_most_shared_picks_the_statements_the_other_options_name():
    # B shares "ii" and "and" with A and "iii" with C; D shares "i" with B, "and iii" with C.
    assert [
        reply("most_shared_with_options", prompt(STEM, choices))
        for choices in (
            ["i and ii", "ii and iii", "iii", "iv"],
            ["iv", "i", "ii and iii", "i and iii"],
        )
    ] == ["###B###", "###D###"]


def test_a_random_letter_is_uniform_and_replayed_by_its_seed():
    rng = random.Random(0)
    factory = lexam_policies(open_question=False, brief=True, policy_judge=False)["random_letter"]
    teachers = [factory(TASK, rng) for _ in range(200)]
    message = [{"role": "user", "content": prompt(STEM, CHOICES)}]
    answers = [teacher("examinee", message) for teacher in reversed(teachers)][::-1]
    counts = {letter: answers.count(f"###{letter}###") for letter in "ABCD"}
    assert all(30 <= count <= 70 for count in counts.values()), counts
    rng = random.Random(0)
    assert [factory(TASK, rng)("examinee", message) for _ in range(200)] == answers


@pytest.mark.parametrize(
    "name", list(lexam_policies(open_question=False, brief=True, policy_judge=False))
)
def test_no_policy_reads_the_gold(name):
    text = prompt(STEM, CHOICES)
    replies = {reply(name, text, task=dataclasses.replace(TASK, gold=g)) for g in range(4)}
    assert len(replies) == 1


def _bounded(name: str, env) -> None:
    rows = audit_env(name, env, env.tasks("test"), None)
    teacher, degenerate = rows[0], rows[1:]
    assert teacher.policy == TEACHER and teacher.failed == 0 and teacher.mean_reward > 0
    assert set(env.degenerate_policies()) <= {row.policy for row in degenerate}
    above = {row.policy: round(row.share, 3) for row in degenerate if row.share > SHARE_BOUND}
    assert not above, f"{name}: degenerate policies above {SHARE_BOUND:.0%} of the teacher"


def test_the_cpu_demos_mcq_test_split_holds_every_degenerate_policy_under_the_bound():
    _bounded("lexam", make_env(load_config(ROOT / "configs/lexam_cpu.yaml").env))


def test_the_mixtures_open_questions_hold_every_degenerate_policy_under_the_bound():
    mixture = make_env(load_config(ROOT / "configs/legal_mix_cpu.yaml").env)
    _bounded("lexam", mixture.member_envs()["lexam"])
