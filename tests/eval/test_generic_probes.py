"""The generic probes (`lexrl.envs.degenerate.generic_probes`) the audit plays on every env with no
code in the env: a throwaway two-agent plugin whose issue list, scored by recall, credits an
unparsable list like an explicit "none" is flagged by its component alone, its fixed version is
not, and each probe gives the reply its name says."""

import asyncio
import json
import random
from collections import Counter

import pytest

from lexrl.envs.base import Env
from lexrl.envs.degenerate import (
    CONTENT_FREE,
    UNPARSABLE,
    ProbePolicy,
    ProbeUnplayable,
    common_replies,
    copy_prompt,
    generic_probes,
    half_teacher,
    other_role_teacher,
    other_task_teacher,
)
from lexrl.eval.audit import (
    COMPONENT_BOUND,
    SHARE_BOUND,
    TEACHER,
    audit,
    audit_env,
    markdown,
    sample_tasks,
)
from lexrl.types import Task

SPOTTER = "You spot the legal issues of a contract clause."
RATER = "You rate a contract clause's risk as low or high."
CLAUSES = {
    "train": [
        ("The supplier indemnifies the buyer against every claim.", ["indemnity"]),
        ("Either party may end this agreement on notice.", []),
        ("Payment is due within thirty days of the invoice.", []),
        ("Neither party is liable for anything, ever.", ["liability", "indemnity"]),
        ("This agreement is governed by the law of Zurich.", []),
        ("Notices are sent to the addresses above.", []),
    ],
    "test": [
        ("Deliveries are made to the buyer's warehouse.", []),
        ("The buyer may terminate at once, without cause or notice.", ["termination"]),
        ("Invoices are issued monthly.", []),
        ("The parties meet once a quarter.", []),
        ("The seller's liability is unlimited and it indemnifies all.", ["liability", "indemnity"]),
        ("Prices are in Swiss francs.", []),
        ("Each party bears its own costs.", []),
        ("The goods are packed in boxes.", []),
    ],
}


def clause_tasks(split: str) -> list[Task]:
    return [
        Task(
            id=f"{split}-{i}",
            inputs={"clause": clause},
            gold={"issues": issues, "rating": "high" if issues else "low"},
        )
        for i, (clause, issues) in enumerate(CLAUSES[split])
    ]


def listed_issues(reply: str, unparsable_is_none: bool) -> list[str] | None:
    """The issues of the spotter's `Issues: a, b` line (`none`: no issue); None without the line,
    or, with the hole, [] as if it had said none."""
    line = next((ln for ln in reply.splitlines() if ln.startswith("Issues:")), None)
    if line is None:
        return [] if unparsable_is_none else None
    text = line.removeprefix("Issues:").strip()
    return [] if text == "none" else [item.strip() for item in text.split(",") if item.strip()]


class ClauseEnv(Env):
    """A spotter lists a clause's issues, a rater rates its risk; the issue list is scored by
    recall, an explicit "none" right when there is none. `unparsable_is_none` is the hole: an
    unparsable list scored like "none". No degenerate policies of its own."""

    name = "clauses"
    roles = ("spotter", "rater")
    reward_components = ("issues", "rating")

    def __init__(self, unparsable_is_none: bool = True):
        self.unparsable_is_none = unparsable_is_none

    def tasks(self, split: str) -> list[Task]:
        return clause_tasks(split)

    async def run_episode(self, task, policy):
        clause = task.inputs["clause"]
        listed = await policy.chat("spotter", SPOTTER, clause)
        rated = await policy.chat("rater", RATER, f"{clause}\n\nIssues found: {listed}")
        issues = listed_issues(listed, self.unparsable_is_none)
        gold = task.gold["issues"]
        if issues is None:
            credit = 0.0
        elif not gold:
            credit = float(not issues)
        else:
            credit = len(set(issues) & set(gold)) / len(gold)
        rating = float(rated.strip() == f"Rating: {task.gold['rating']}")
        return policy.finish(issues, {"issues": credit, "rating": rating})

    def teacher(self, task, rng):
        replies = {
            "spotter": f"Issues: {', '.join(task.gold['issues']) or 'none'}",
            "rater": f"Rating: {task.gold['rating']}",
        }
        return lambda role, messages: replies[role]


def rows_by_policy(env: Env) -> dict:
    return {row.policy: row for row in audit_env(env.name, env, env.tasks("test"), None)}


def test_an_unparsable_list_credited_like_none_is_flagged_by_its_component():
    rows = rows_by_policy(ClauseEnv(unparsable_is_none=True))
    tasks = clause_tasks("test")
    without_issues = sum(not task.gold["issues"] for task in tasks) / len(tasks)
    assert without_issues > COMPONENT_BOUND
    for name in ("unparsable", "empty"):
        row = rows[name]
        assert row.flags == ["issues"], name
        assert row.component_shares["issues"] == pytest.approx(without_issues)
        # The total hides it: the rating pays nothing, so the share stays under the bound.
        assert row.share == pytest.approx(without_issues / 2) and row.share <= SHARE_BOUND
        assert row.as_json()["flags"] == ["issues"]
    assert not rows[TEACHER].flags and not rows["other_task_teacher"].flags
    table = markdown(list(rows.values()))
    assert f"| clauses | unparsable | **{without_issues:.0%}** ⚠ | 0% |" in table.splitlines()
    json.dumps([row.as_json() for row in rows.values()])


def test_the_fixed_env_raises_no_flag():
    rows = rows_by_policy(ClauseEnv(unparsable_is_none=False))
    assert not [(name, row.flags) for name, row in rows.items() if row.flags]
    assert set(CONTENT_FREE) <= set(rows)
    assert rows["unparsable"].component_shares == {"issues": 0.0, "rating": 0.0}


def test_every_probe_is_played_on_an_env_that_declares_none_of_them():
    class OwnPolicies(ClauseEnv):
        def degenerate_policies(self):
            return {"always_low": lambda task, rng: lambda role, messages: "Rating: low"}

    rows = rows_by_policy(OwnPolicies())
    probes = ("unparsable", "copy_prompt", "other_task_teacher", "other_role_teacher")
    assert {"always_low", "empty", "echo", *probes, "common_teacher_reply", "half_teacher"} == (
        set(rows) - {TEACHER}
    )
    assert rows[TEACHER].note == ""


def test_an_env_without_a_teacher_gets_the_content_free_probes_and_a_note():
    class NoTeacher(ClauseEnv):
        def teacher(self, task, rng):
            return Env.teacher(self, task, rng)

    rows = audit(NoTeacher(), None, max_tasks=3)
    assert [row.policy for row in rows] == [TEACHER, "empty", "echo", "unparsable", "copy_prompt"]
    left = "other_task_teacher, other_role_teacher, common_teacher_reply, half_teacher"
    assert rows[0].note.endswith(f"left out, the env has no scripted teacher: {left}")


def reply(factory, task: Task, role: str, messages="a clause") -> str:
    return factory(task, random.Random(0))(role, messages)


def test_the_unparsable_reply_has_nothing_to_parse():
    assert listed_issues(UNPARSABLE, unparsable_is_none=False) is None
    assert not any(mark in UNPARSABLE for mark in (":", "#", ",", ";", "\n", "Answer"))
    assert not {"yes", "no", "none", "a", "b", "c", "d"} & set(UNPARSABLE.lower().split())


def test_copy_prompt_sends_every_message_back_the_system_prompt_first():
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "second"},
        {"role": "user", "content": "third"},
    ]
    policy = ProbePolicy(None, "t", copy_prompt(clause_tasks("test")[0], random.Random(0)))
    text = asyncio.run(policy.chat("spotter", SPOTTER, messages))
    assert text == f"{SPOTTER}\n\nfirst\n\nsecond\n\nthird"


def test_other_task_teacher_answers_as_the_teacher_of_a_task_half_the_split_away():
    env, tasks = ClauseEnv(), clause_tasks("test")
    factory = other_task_teacher(env, tasks)
    for i, task in enumerate(tasks):
        other = tasks[(i + len(tasks) // 2) % len(tasks)]
        for role in env.roles:
            assert reply(factory, task, role) == reply(env.teacher, other, role)


def test_other_task_teacher_passes_over_a_task_whose_teacher_raises():
    class Picky(ClauseEnv):
        def teacher(self, task, rng):
            if task.gold["issues"]:
                return lambda role, messages: {}[role]
            return super().teacher(task, rng)

    env, tasks = Picky(), clause_tasks("test")
    assert reply(other_task_teacher(env, tasks), tasks[0], "rater") == "Rating: low"
    with pytest.raises(ProbeUnplayable, match="no other task"):
        reply(other_task_teacher(env, [tasks[0], tasks[1]]), tasks[0], "rater")


def test_other_role_teacher_answers_as_the_teacher_in_the_next_role():
    env, task = ClauseEnv(), clause_tasks("test")[1]
    factory = other_role_teacher(env)
    assert reply(factory, task, "spotter") == reply(env.teacher, task, "rater")
    assert reply(factory, task, "rater") == reply(env.teacher, task, "spotter")


def test_a_teacher_that_answers_every_role_alike_leaves_other_role_teacher_out():
    class Alike(ClauseEnv):
        def teacher(self, task, rng):
            return lambda role, messages: f"Rating: {task.gold['rating']}"

    with pytest.raises(ProbeUnplayable, match="no other role"):
        reply(other_role_teacher(Alike()), clause_tasks("test")[0], "spotter")
    rows = rows_by_policy(Alike())
    assert "other_role_teacher" not in rows
    assert "left out, no other role's teacher reply differs" in rows[TEACHER].note


def test_common_teacher_reply_is_each_roles_most_common_teacher_reply_on_training_tasks():
    env = ClauseEnv()
    counts = {role: Counter() for role in env.roles}
    for task in clause_tasks("train"):
        for role in env.roles:
            counts[role][reply(env.teacher, task, role)] += 1
    expected = {role: seen.most_common(1)[0][0] for role, seen in counts.items()}
    assert common_replies(env, seed=0) == expected
    probes, skipped = generic_probes(env, clause_tasks("test"), 0)
    assert not skipped
    for role in env.roles:
        assert (
            reply(probes["common_teacher_reply"], clause_tasks("test")[1], role) == (expected[role])
        )


def test_half_teacher_is_the_first_half_of_the_teachers_reply():
    env, task = ClauseEnv(), clause_tasks("test")[4]
    whole = reply(env.teacher, task, "spotter")
    assert reply(half_teacher(env), task, "spotter") == whole[: len(whole) // 2]


def test_a_one_role_env_goes_without_other_role_teacher():
    class Single(ClauseEnv):
        roles = ("spotter",)

    _, skipped = generic_probes(Single(), clause_tasks("test"), 0)
    assert skipped == {"other_role_teacher": "the env has one role"}


def test_max_tasks_is_a_seeded_sample_kept_in_order():
    tasks = clause_tasks("test")
    sampled = sample_tasks(tasks, 4, seed=3)
    assert sampled == sample_tasks(tasks, 4, seed=3)
    assert sampled == sorted(sampled, key=tasks.index) and len(set(map(id, sampled))) == 4
    assert any(sample_tasks(tasks, 4, seed) != tasks[:4] for seed in range(5))
    assert sample_tasks(tasks, None, 0) == tasks and sample_tasks(tasks, 99, 0) == tasks
    rows = audit(ClauseEnv(), None, max_tasks=4, seed=3)
    teacher = next(row for row in rows if row.policy == TEACHER)
    assert set(teacher.task_values) == {task.id for task in sampled}
