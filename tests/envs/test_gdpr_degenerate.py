"""The shipped sample's held-out split can show learning (issue 31): enough questions of several
cases, no label a constant answer rides, and no degenerate policy (`gdpr/degenerate.py`) earns
more than `SHARE_BOUND` of the scripted teacher's reward on it; and each surface rule picks
what it claims on a hand-made prompt."""

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from lexrl.config import load_config
from lexrl.envs.gdpr.degenerate import RATIONALE, gdpr_policies, read_prompt
from lexrl.envs.gdpr.env import GdprEnv
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.eval.audit import SHARE_BOUND, TEACHER, audit_env
from lexrl.types import Task

ROOT = Path(__file__).parents[2]
SIMULATED = ["none", "F+LR+AR+CS/bm25/5"]
"""The systems of `gdpr_cpu.yaml`'s grid that have a scripted teacher (the live form has none)."""


@pytest.fixture(scope="module")
def cpu_env():
    """The env of `configs/gdpr_cpu.yaml`, its grid less the live form."""
    config = load_config(ROOT / "configs/gdpr_cpu.yaml").env
    assert config.name == "gdpr"
    config.eval_grid = [s for s in config.eval_grid if s != "live"]
    assert config.source == "sample" and config.eval_grid == SIMULATED
    return GdprEnv(config)


def _majority_share(questions) -> float:
    return Counter(q.answer for q in questions).most_common(1)[0][1] / len(questions)


def test_the_cpu_test_split_is_large_mixed_and_balanced(cpu_env):
    test, train = cpu_env.questions["test"], cpu_env.questions["train"]
    assert len(test) >= 100 and len({q.case for q in test}) >= 2
    assert not {q.case for q in test} & {q.case for q in train} and len(train) >= 60
    yes_no = [q for q in test if q.kind == "yes_no"]
    assert {q.answer for q in yes_no} == {"Yes", "No"}
    assert _majority_share(test) <= 0.6 and _majority_share(yes_no) <= 0.6
    # `eval.max_tasks` keeps a prefix: the first 30 questions are mixed too.
    first = test[:30]
    assert len({q.case for q in first}) >= 2 and _majority_share(first) <= 0.6
    first_yes_no = [q for q in first if q.kind == "yes_no"]
    assert _majority_share(first_yes_no) <= 0.6


def test_the_mixtures_split_of_the_sample_is_balanced_too():
    """`legal_mix_cpu.yaml`'s gdpr member (eval_fraction 0.5: 108 questions of 3 cases), and the
    first 30 of them its `eval.max_tasks` keeps."""
    mixture = load_config(ROOT / "configs/legal_mix_cpu.yaml").env
    (config,) = [member.env for member in mixture.members if member.env.name == "gdpr"]
    test = GdprEnv(config).questions["test"]
    assert len({q.case for q in test}) >= 2 and _majority_share(test[:30]) <= 0.6
    assert {q.answer for q in test[:30] if q.kind == "yes_no"} == {"Yes", "No"}


def test_no_degenerate_policy_earns_more_than_the_bound_on_the_test_split(cpu_env):
    tasks = cpu_env.tasks("test")
    rows = audit_env("gdpr", cpu_env, tasks, None)
    teacher, degenerate = rows[0], rows[1:]
    assert teacher.policy == TEACHER and teacher.failed == 0 and teacher.mean_reward > 0
    assert teacher.tasks == 2 * len(cpu_env.questions["test"])
    assert set(cpu_env.degenerate_policies()) <= {row.policy for row in degenerate}
    assert all(row.failed == 0 for row in degenerate)
    above = {row.policy: round(row.share, 3) for row in degenerate if row.share > SHARE_BOUND}
    assert not above, f"degenerate policies above {SHARE_BOUND:.0%} of the teacher: {above}"


# -- the rules on hand-made prompts ---------------------------------------------------------


@pytest.fixture(scope="module")
def env():
    return GdprEnv(GdprEnvConfig(eval_grid=["none"]))


def _task(question: str, options: dict[str, str], gold: str, task_id: str = "t#1") -> Task:
    kind = "yes_no" if set(options) == {"Yes", "No"} else "abcd"
    inputs = {"question": question, "options": options, "kind": kind, "case": "c"}
    return Task(id=task_id, inputs=inputs, gold=gold, meta={"system": "none"})


YES_NO = {"Yes": "Yes", "No": "No"}
ABCD = {
    "A": "Article 5 storage limitation",
    "B": "The controller failed to encrypt the laptop disks",
    "C": "A fine",
    "D": "All of the above",
}
TRAIN = [
    _task("Does the notice find a breach?", YES_NO, "No", "a#1"),
    _task("Does the notice name a processor?", YES_NO, "No", "a#2"),
    _task("Did Acme report the breach?", YES_NO, "Yes", "a#3"),
    _task("Did Acme encrypt data?", YES_NO, "Yes", "a#4"),
    _task("Was Acme fined?", YES_NO, "Yes", "a#5"),
    _task("Which principle?", ABCD, "B", "a#6"),
]


def _reply(env, name: str, task: Task, context=(), seed: int = 0) -> str:
    """The policy's reply to the Meta-LLM's answer prompt of `task` with `context`."""
    teacher = gdpr_policies(TRAIN)[name](task, random.Random(seed))
    messages = [
        {"role": "system", "content": env.prompts["meta_answer"]},
        {"role": "user", "content": env.user_message(task, list(context))},
    ]
    return teacher("meta", messages)


def _label(env, name: str, task: Task, context=(), seed: int = 0) -> str:
    return json.loads(_reply(env, name, task, context, seed))["answer"]


def test_read_prompt_takes_back_what_the_env_wrote(env):
    task = _task("Which of these?\nA second line.", ABCD, "B")
    prompt = read_prompt(env.user_message(task, ["entity: Acme", "Question: a chunk's own"]))
    assert prompt.question == "Which of these?\nA second line."
    assert prompt.options == ABCD and list(prompt.options) == list("ABCD")
    assert prompt.context == "[1] entity: Acme\n\n[2] Question: a chunk's own"
    decompose = read_prompt(f"Question: {env.question_text(task)}")
    assert (decompose.options, decompose.context) == (ABCD, "")
    assert read_prompt("Material:\n[1] x\n\nSub-task: Which data?").options == {}


@pytest.mark.parametrize(
    ("name", "question", "expected"),
    [
        ("negation_no", "Was the laptop not encrypted?", "No"),
        ("negation_no", "Wasn't the laptop encrypted?", "No"),
        ("negation_no", "Did Acme fail to encrypt the laptop?", "Yes"),
        ("compliance_no", "Did Acme comply with Article 32?", "No"),
        ("compliance_no", "Were the measures adequate?", "No"),
        ("compliance_no", "Did Acme infringe Article 32?", "Yes"),
        ("wording_majority", "Does Article 32 apply?", "No"),
        ("wording_majority", "Did Acme delay?", "Yes"),
        ("wording_majority", "Under Article 33, was it late?", "Yes"),  # unseen: the prior
        ("majority_label", "Does Article 32 apply?", "Yes"),
    ],
)
def test_yes_no_rules_read_the_question(env, name, question, expected):
    # The gold is the other label: the rule cannot have read it.
    gold = "No" if expected == "Yes" else "Yes"
    assert _label(env, name, _task(question, YES_NO, gold)) == expected


def test_yes_no_rules_answer_a_d_with_the_training_majority_letter(env):
    task = _task("Which principle was not met?", ABCD, "A")
    for name in ("negation_no", "compliance_no", "majority_label"):
        assert _label(env, name, task) == "B"


def test_option_rules_pick_what_they_claim(env):
    question = "Which disks did the controller fail to encrypt?"
    task = _task(question, ABCD, "C")
    assert _label(env, "longest_option", task) == "B"
    assert _label(env, "all_of_the_above", task) == "D"
    no_summary = _task(question, {**ABCD, "D": "Only the servers"}, "C")
    assert _label(env, "all_of_the_above", no_summary) == "B"
    assert _label(env, "question_overlap", task) == "B"  # controller, fail, encrypt, disks
    bare = _task("Which one applies?", ABCD, "A")
    assert _label(env, "prompt_overlap", bare, ["A fine was imposed."]) == "C"  # a, fine
    assert _label(env, "prompt_overlap", bare) == "A"
    # Equal scores go to the first option: "Yes" is longer than "No", and neither overlaps.
    assert _label(env, "longest_option", _task("Was it late?", YES_NO, "No")) == "Yes"
    assert _label(env, "question_overlap", _task("Was it late?", YES_NO, "No")) == "Yes"
    sentence = {"Yes": "Yes", "No": "No, the controller remains fully responsible"}
    assert _label(env, "longest_option", _task("Is the processor liable?", sentence, "Yes")) == "No"


def test_random_label_is_uniform_over_valid_labels_and_fixed_within_a_task(env):
    task = _task("Which principle?", ABCD, "B")
    labels = Counter(_label(env, "random_label", task, seed=seed) for seed in range(400))
    assert set(labels) == set("ABCD") and min(labels.values()) > 70
    teacher = gdpr_policies(TRAIN)["random_label"](task, random.Random(1))
    messages = [{"role": "user", "content": env.user_message(task, [])}]
    assert len({teacher("meta", messages) for _ in range(5)}) == 1
    assert _label(env, "random_label", _task("Late?", YES_NO, "No")) in {"Yes", "No"}


def test_every_policy_replies_in_every_role_and_never_reads_the_gold(env):
    policies = gdpr_policies(TRAIN)
    agent = [{"role": "user", "content": "Material:\n[1] x\n\nSub-task: Which data leaked?"}]
    for gold in ABCD:
        task = _task("Which principle?", ABCD, gold)
        replies = {name: _reply(env, name, task, ["[1] chunk"]) for name in policies}
        if gold == "A":
            first = replies
        assert replies == first
    for name, factory in policies.items():
        teacher = factory(_task("Which principle?", ABCD, "A"), random.Random(0))
        reply = teacher("facts", agent)
        assert isinstance(reply, str)
        if name not in ("empty", "echo") and not name.startswith("always_"):
            assert reply == RATIONALE
            assert len(_reply(env, name, _task("Which?", ABCD, "A"))) < 80  # cut at 64 tokens


def test_the_policies_on_the_env_are_the_rules_with_the_training_priors(env):
    policies = env.degenerate_policies()
    expected = {"empty", "echo", "majority_label", "random_label", "longest_option"}
    assert expected | {"negation_no", "all_of_the_above", "prompt_overlap"} <= set(policies)
    assert {f"always_{label}" for label in ("Yes", "No", "A", "B", "C", "D")} <= set(policies)
