"""`lexrl audit` checks the env contract first (`lexrl.envs.check.check_env` on each split):
a clean env has no problem; an env that breaks the contract has its problems printed above the
table and ends in a `run error` (exit 9). Where its code raises in the audit too, the problems
are printed before the exception ends the command (`tests/test_plugin_boundary.py`)."""

import pytest

from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.errors import EvaluationFailed
from lexrl.eval.audit import TEACHER, audit, check, check_markdown, refuse
from tests.envs.test_check import NanReward, RaisingTasks, Toy


def test_a_clean_env_is_audited_with_no_check_lines():
    env = LexamEnv(LexamEnvConfig())
    problems = check(env, None)
    rows = audit(env, None, max_tasks=3)
    assert problems == [] and rows[0].policy == TEACHER
    assert check_markdown(problems) == ""
    refuse(problems)  # no problem: returns


def test_a_toy_env_is_clean_on_both_splits():
    assert check(Toy(), None) == []


def test_problems_are_printed_above_the_table_and_end_in_a_run_error():
    problems = check(NanReward(), None)
    rows = audit(NanReward(), None, max_tasks=3)
    assert problems == [
        f"{split}: toy: task q0, policy teacher: reward component 'format' is nan, not a finite "
        "number: the episode counts as failed (and 8 more episodes)"
        for split in ("train", "test")
    ]
    assert rows and rows[0].failed == 3
    head = check_markdown(problems)
    assert head.splitlines()[0].startswith("**env check: 2 problems** ⚠")
    assert head.splitlines()[1:] == [f"- {problem}" for problem in problems]
    with pytest.raises(
        EvaluationFailed, match=r"^env check: 2 problems, first: train: toy: "
    ) as error:
        refuse(problems)
    assert error.value.exit_code == 9


def test_an_env_whose_code_raises_is_named_by_the_check_before_the_audit_raises():
    problems = check(RaisingTasks(), None)
    assert problems == [
        "train: toy: tasks('train') raised ValueError: no split 'train'",
        "test: toy: tasks('test') raised ValueError: no split 'test'",
    ]
    with pytest.raises(ValueError, match="no split 'test'"):
        audit(RaisingTasks(), None, max_tasks=3)


def test_a_check_with_a_token_cap_needs_the_tokenizer():
    with pytest.raises(ValueError, match="tokenizer"):
        check(Toy(), None, max_new_tokens=8)
