"""The argument env's workflows, played by scripted policies: the teacher's upper bound, gold
kept out of prompts, RMA's analyst and polisher, per-role rewards, the external analyst."""

import asyncio
import dataclasses
import json
import random
import re

import pytest
from transformers import AutoTokenizer

from lexrl.envs.argument.degenerate import argument_policies
from lexrl.envs.argument.env import FORCED_TERMINATION, ArgumentEnv
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.argument.parsing import parse_ply
from lexrl.envs.argument.reward import (
    COMPONENTS,
    argument_parts,
    triple_components,
    weighted,
)
from lexrl.envs.argument.scenarios import TABLE_1
from lexrl.envs.base import ReportRequest
from lexrl.errors import ConfigError
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge import JudgeClient, JudgeConfig
from lexrl.types import Group, Task
from tests.env_options import load_env
from tests.rewards.test_judge import FakeServer

WORKFLOWS = ("SA", "SA-EP", "MA", "RMA")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


def small_env(**options):
    return ArgumentEnv(ArgumentEnvConfig(train_per_kind=5, test_per_kind=6, **options))


def play(env, task, tokenizer, respond):
    """One episode whose every `chat` is answered by `respond(role, messages)`."""
    asked = []

    def teacher(role, messages):
        asked.append((role, messages))
        return respond(role, messages)

    return asyncio.run(env.run_episode(task, ScriptedPolicy(tokenizer, task.id, teacher))), asked


def with_scenario(env, scenario):
    """A task of `scenario`, registered with `env`."""
    env._scenarios[scenario.id] = scenario
    from lexrl.envs.argument.env import to_task

    return to_task(scenario)


def ply_reply(analogies, distinctions, argument, abstain=False):
    """A ply's reply in the claims schema."""
    return json.dumps(
        {
            "abstain": abstain,
            "analogies": analogies,
            "distinctions": distinctions,
            "argument": argument,
        }
    )


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_the_teacher_scores_100_on_every_column_through_each_workflow(workflow, tokenizer):
    env = small_env(workflow=workflow)
    tasks = env.tasks("test")
    groups = []
    for task in tasks:
        trajectory, _ = play(env, task, tokenizer, env.teacher(task, random.Random(0)))
        groups.append(Group(task, [trajectory]))
    table = env.report(tasks, groups, ReportRequest("test", "scripted", None)).data
    for name, row in table.items():
        assert row["n"] == {"arguable": 6, "mismatched": 6, "non_arguable": 6}, name
        # Rec_U is not among them: a CATO argument cites its side's factors, not all of them.
        cells = [
            *row["hallucination_accuracy"].values(),
            *row["successful_abstention"].values(),
            *row["abstention_accuracy"].values(),
        ]
        assert all(cell["mean"] == 100.0 for cell in cells), (name, cells)
    assert list(table) == [f"{workflow} (scripted)", "teacher"]
    arguable = [g.trajectories[0] for g in groups if g.task.gold["kind"] == "arguable"]
    assert [t.metrics["argument_quality"] for t in arguable] == [1.0] * 6
    assert all(t.metrics["right_decision"] == 1.0 for g in groups for t in g.trajectories)


def test_argue_rates_per_kind_show_the_separation_a_blind_policy_lacks(tokenizer):
    """The teacher argues on arguable triples only (separation 1); a policy that argues on every
    triple decides rightly on arguable ones too, but argues as often where it must not
    (separation 0)."""
    env = small_env(workflow="MA")
    policies = {
        "teacher": env.teacher,
        "blind": argument_policies()["always_argue_claiming_everything"],
    }
    rates = {}
    for name, policy in policies.items():
        for task in env.tasks("test"):
            trajectory, _ = play(env, task, tokenizer, policy(task, random.Random(0)))
            kind = task.gold["kind"]
            assert {k for k in trajectory.metrics if k.startswith("argues_")} == {f"argues_{kind}"}
            rates.setdefault(name, {}).setdefault(kind, set()).add(
                trajectory.metrics[f"argues_{kind}"]
            )
    assert rates["teacher"] == {"arguable": {1.0}, "mismatched": {0.0}, "non_arguable": {0.0}}
    assert rates["blind"] == {"arguable": {1.0}, "mismatched": {1.0}, "non_arguable": {1.0}}


@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_the_scenario_kind_never_reaches_a_prompt(workflow, tokenizer):
    env = small_env(workflow=workflow)
    for task in env.tasks("test"):
        trajectory, _ = play(env, task, tokenizer, env.teacher(task, random.Random(0)))
        for turn in trajectory.turns:
            prompt = tokenizer.decode(turn.prompt_ids).lower()
            for word in ("arguable", "mismatched", "non_arguable", "non-arguable"):
                assert word not in prompt, (task.gold["kind"], turn.role, word)


PROSE = "TERMINATE. None of this is true: c1 shares no factor with c2, and F99 is c3's."
"""Prose that abstains, denies every claim and cites a factor no case has."""


def with_prose(respond, prose):
    """`respond` with the argument of every ply it writes replaced by `prose`."""

    def rewritten(role, messages):
        reply = respond(role, messages)
        if role == "single":
            plies = json.loads(reply)
            return json.dumps({name: ply | {"argument": prose} for name, ply in plies.items()})
        if role in ("plaintiff", "defendant"):
            return json.dumps(json.loads(reply) | {"argument": prose})
        return reply

    return rewritten


@pytest.mark.parametrize("workflow", ["SA", "MA"])
def test_the_reward_does_not_change_when_only_the_prose_changes(workflow, tokenizer):
    """With `extract_factors: json` no reward component, role reward or metric reads a ply's
    prose: the teacher's plies with prose that contradicts their claims score what the
    teacher's own do, on every kind of triple."""
    env = small_env(workflow=workflow)
    for task in env.tasks("test"):
        teacher = env.teacher(task, random.Random(0))
        own, _ = play(env, task, tokenizer, teacher)
        contradicted, _ = play(env, task, tokenizer, with_prose(teacher, PROSE))
        assert [p["argument"] for p in contradicted.outcome["plies"]] == [PROSE] * 3
        assert contradicted.components == own.components, task.gold
        assert contradicted.role_rewards == own.role_rewards
        assert contradicted.metrics == own.metrics


def shown(prompt, label):
    """The line of `prompt` after `label` (an earlier ply as a later agent reads it)."""
    assert label in prompt, label
    return prompt.split(label, 1)[1].split("\n", 1)[0]


def test_ma_rewards_by_hand_and_each_arguer_gets_its_own_plies(tokenizer):
    env = small_env(
        workflow="MA",
        abstention_weight=1.0,
        hallucination_weight=1.0,
        utilisation_weight=0.5,
        format_weight=0.2,
        over_abstention_penalty=0.6,
        failed_abstention_penalty=0.7,
    )
    task = with_scenario(env, TABLE_1)
    plies = {
        # the analogy on F4 (true, the plaintiff's whole argument) and a false distinction: F23
        # is c1's, not c2's. Cited: F4 for c1 and c2, F23 for c2 (c2 lacks it: one
        # hallucination)
        1: {
            "abstain": False,
            "analogies": [["F4", "c1", "c2"]],
            "distinctions": [["F23", "c2", "c1"]],
            "argument": "c1 is like c2 on F4 and F23.",
        },
        # abstains although the ply can be argued
        2: {
            "abstain": True,
            "analogies": [],
            "distinctions": [],
            "argument": "TERMINATE: no basis.",
        },
        3: "not json at all",
    }

    def respond(role, messages):
        ply = int(messages[0]["content"].split("Write ply ")[1][0])
        return plies[ply] if isinstance(plies[ply], str) else json.dumps(plies[ply])

    trajectory, asked = play(env, task, tokenizer, respond)
    assert [role for role, _ in asked] == ["plaintiff", "defendant", "plaintiff"]
    # the defendant sees ply 1, the rebuttal both earlier plies (each on its own line, its
    # prose among what is shown)
    first, second = (
        "Ply 1 (the plaintiff's argument): ",
        "Ply 2 (the defendant's counterargument): ",
    )
    assert "c1 is like c2 on F4 and F23." in shown(asked[1][1][0]["content"], first)
    assert "c1 is like c2 on F4 and F23." in shown(asked[2][1][0]["content"], first)
    assert "TERMINATE: no basis." in shown(asked[2][1][0]["content"], second)
    # N_gt = 9; cited c1 {F4}, c2 {F4, F23}: N_h = 1, N_util = 2
    assert trajectory.metrics["hallucination_accuracy"] == pytest.approx(1 - 1 / 9)
    assert trajectory.metrics["hallucination_accuracy_extracted"] == pytest.approx(1 - 1 / 3)
    assert trajectory.metrics["utilisation_recall"] == pytest.approx(2 / 9)
    assert trajectory.metrics["abstention_accuracy"] == pytest.approx(2 / 3)
    assert trajectory.metrics["format_validity"] == pytest.approx(2 / 3)
    # The reward gates every credit on a right decision: only ply 1 argues the analogy where it
    # can be argued; ply 2 abstains there and ply 3 says nothing (no JSON): both earn 0 and pay
    # the over-abstention penalty (saying nothing earns no more than a wrong abstention), and the
    # argument, as good as its weakest ply, earns 0.
    # Every ply can be argued, so none earns abstention credit.
    assert trajectory.components == pytest.approx(
        {
            "abstention": 0.0,
            "hallucination": 8 / 9 * 1 / 3,
            "utilisation": 0.0,
            "format": 0.2 * 1 / 3,
            "over_abstention": -0.6 * 2 / 3,
            "failed_abstention": 0.0,  # every ply of TABLE_1 can be argued: none owes an abstention
        }  # fmt: skip
    )
    # plaintiff: ply 1 (hallucination 8/9; utilisation 0.5 * its quality * its 1 part: the
    # plaintiff's argument is the 1 claim F4 shared by c1 and c2, made (recall 1), and the
    # false distinction outside it costs 1 claim per claim of the argument: 1 - 1/1 = 0; format
    # 0.2) and ply 3 (nothing: over-abstention -0.6); defendant: ply 2 (over-abstention -0.6)
    ply1 = 8 / 9 + 0.5 * 0.0 * 1 + 0.2
    assert trajectory.role_rewards == pytest.approx(
        {"plaintiff": (ply1 - 0.6) / 2, "defendant": -0.6}
    )


def rma_script(drafts, verdicts, reviews, revisions=()):
    """Answers RMA's roles in order: each list is consumed one reply per call."""
    queues = {
        "draft": list(drafts),
        "analyst": list(verdicts),
        "polisher": list(reviews),
        "revision": list(revisions),
    }

    def respond(role, messages):
        if role in ("plaintiff", "defendant"):
            return queues["revision" if len(messages) > 1 else "draft"].pop(0)
        return queues[role].pop(0)

    return respond


def test_rma_analyst_forces_termination_and_correction_triggers_one_revision(tokenizer):
    env = small_env(workflow="RMA")
    task = with_scenario(env, TABLE_1)
    good = ply_reply([["F4", "c1", "c2"]], [], "Grounded.")
    fabricated = ply_reply([], [["F7", "c1", "c2"]], "Made up.")  # c1 lacks F7
    respond = rma_script(
        drafts=[good, fabricated, good],
        verdicts=["Fine.\nVALID_ARGUMENT", "F7 is not in c1.\nREQUIRES_CORRECTION", "TERMINATE"],
        reviews=["Clear.\nREVISE: no", "Use F5.\nREVISE: yes"],
        revisions=[good],
    )
    trajectory, asked = play(env, task, tokenizer, respond)
    roles = [role for role, _ in asked]
    assert roles == [
        "plaintiff", "analyst", "polisher",
        "defendant", "analyst", "polisher", "defendant",
        "plaintiff", "analyst",
    ]  # fmt: skip
    revision = asked[6][1]
    assert "F7 is not in c1." in revision[-1]["content"] and "Use F5." in revision[-1]["content"]
    plies = trajectory.outcome["plies"]
    assert plies[1]["argument"] == "Grounded."  # the revision replaced the fabricated draft
    assert plies[2]["argument"] == FORCED_TERMINATION and plies[2]["abstain"]
    assert trajectory.metrics["revisions"] == 1 and trajectory.metrics["analyst_terminations"] == 1
    # a correct analyst: VALID (ply 1), CORRECTION (ply 2: F7 fabricated), VALID (ply 3's draft
    # is grounded) -> 2 of 3 verdicts right; the polisher: no on a valid draft (right), yes on
    # the fabricated one (right)
    assert trajectory.metrics["verdict_accuracy"] == pytest.approx(2 / 3)
    assert trajectory.role_rewards["analyst"] == pytest.approx(2 / 3)
    assert trajectory.role_rewards["polisher"] == 1.0
    assert {turn.role for turn in trajectory.turns if turn.trainable} == set(env.roles)


def test_an_external_analyst_is_recorded_untrainable_and_its_failure_fails_the_episode(
    tokenizer, tmp_path
):
    judges = [JudgeConfig("http://judge.test/v1", "analyst-model", max_retries=0)]
    env = small_env(workflow="RMA", analyst="judge", judges=judges, judge_cache_dir=str(tmp_path))
    assert env.roles == ("plaintiff", "defendant")
    task = with_scenario(env, TABLE_1)
    good = ply_reply([["F4", "c1", "c2"]], [], "Grounded.")
    server = FakeServer({"analyst-model": ["Fine.\nVALID_ARGUMENT\nREVISE: no"]})
    env.__dict__["judge_client"] = JudgeClient(judges, tmp_path, http_client_factory=server.http_client)  # fmt: skip
    trajectory, asked = play(env, task, tokenizer, lambda role, messages: good)
    assert [role for role, _ in asked] == ["plaintiff", "defendant", "plaintiff"]
    external = [turn for turn in trajectory.turns if turn.role in ("analyst", "polisher")]
    assert len(external) == 6 and not any(turn.trainable for turn in external)
    assert trajectory.failed is None and len(server.requests) == 6

    failing = small_env(workflow="RMA", analyst="judge", judges=judges, judge_cache_dir=None)
    task = with_scenario(failing, TABLE_1)
    server = FakeServer({"analyst-model": [(500, "down")]})
    failing.__dict__["judge_client"] = JudgeClient(judges, None, http_client_factory=server.http_client)  # fmt: skip
    trajectory, _ = play(failing, task, tokenizer, lambda role, messages: good)
    assert trajectory.failed and "analyst" in trajectory.failed and trajectory.components == {}


def test_the_teacher_writes_warm_start_turns_for_every_role(tokenizer):
    env = small_env(workflow="RMA")
    weights = env.weights
    for task in env.tasks("train")[:3]:  # one triple of each kind
        scenario = env.scenario(task)
        trajectory, asked = play(env, task, tokenizer, env.teacher(task, random.Random(0)))
        assert {role for role, _ in asked} == {"plaintiff", "defendant", "analyst", "polisher"}
        assert trajectory.metrics["verdict_accuracy"] == 1.0
        # An arguable triple (no ply owes an abstention): Acc_H 1 on all three plies, quality 1
        # times each part of the argument, every ply valid. One whose plies must all abstain:
        # abstention and format on all three.
        arguable = weights["hallucination"] + weights["format"]
        arguable += weights["utilisation"] * argument_parts(scenario)
        abstaining = weights["abstention"] + weights["format"]
        expected = arguable if task.gold["kind"] == "arguable" else abstaining
        assert trajectory.reward == pytest.approx(expected), task.gold


def test_options_are_checked_and_splits_come_from_disjoint_seeds():
    with pytest.raises(ConfigError, match="`env.workflow` is 'debate'"):
        load_env("argument", workflow="debate")
    with pytest.raises(ConfigError, match="`env`: .*need `judges`"):
        load_env("argument", workflow="RMA", analyst="judge")
    env = small_env()
    train, test = env.tasks("train"), env.tasks("test")
    assert len(train) == 15 and len(test) == 18
    assert not {t.id for t in train} & {t.id for t in test}
    # test triples interleave the kinds, so a prefix of them keeps every kind
    assert [t.gold["kind"] for t in test[:3]] == ["arguable", "mismatched", "non_arguable"]
    assert env.stats()["test"]["by_kind"] == {"arguable": 6, "mismatched": 6, "non_arguable": 6}


def test_a_prompts_folder_replaces_the_prompts_it_holds_and_is_checked(
    tmp_path, tokenizer, monkeypatch
):
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "defendant.txt").write_text("Defendant's lawyer: ply 2, as JSON.\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    load_env("argument", workflow="MA", prompts_dir=str(folder))
    env = small_env(workflow="MA", prompts_dir=str(folder))
    task = env.tasks("test")[0]
    trajectory, _ = play(env, task, tokenizer, lambda role, messages: '{"argument": "x"}')
    prompts = {turn.role: tokenizer.decode(turn.prompt_ids) for turn in trajectory.turns}
    built_in = small_env(workflow="MA").prompts
    assert "Defendant's lawyer: ply 2, as JSON." in prompts["defendant"]
    assert built_in["defendant"].strip() not in prompts["defendant"]
    assert built_in["plaintiff"].strip() in prompts["plaintiff"]
    (folder / "defendent.txt").write_text("a typo\n")
    with pytest.raises(ConfigError, match=r"`env.prompts_dir`: .*defendent.txt is not a prompt"):
        load_env("argument", prompts_dir=str(folder))
    (folder / "defendent.txt").unlink()
    (folder / "plaintiff.txt").write_text("  \n")
    with pytest.raises(ConfigError, match=r"plaintiff.txt is empty"):
        load_env("argument", prompts_dir=str(folder))
    with pytest.raises(ConfigError, match=r"`env.prompts_dir`: .*missing is not a folder"):
        load_env("argument", prompts_dir=str(tmp_path / "missing"))
    monkeypatch.chdir(tmp_path)
    where = re.escape(f"missing is not a folder (a relative path is read from {tmp_path})")
    with pytest.raises(ConfigError, match=where):
        load_env("argument", prompts_dir="missing")


def test_a_scenario_file_is_the_test_split(tmp_path):
    from lexrl.envs.argument.scenarios import scenario_to_json

    path = tmp_path / "mine.jsonl"
    path.write_text(scenario_to_json(TABLE_1) + "\n")
    env = small_env(scenarios=str(path))
    assert [t.id for t in env.tasks("test")] == ["table1-arguable"] and len(
        env.tasks("train")
    ) == 15
    assert isinstance(env.tasks("test")[0], Task)


def test_each_split_is_generated_on_first_use_only(monkeypatch):
    import lexrl.envs.argument.env as argument_env

    generated = []
    real = argument_env.generate_scenarios

    def counting(kinds, complexity, seeds, *rest):
        generated.append(len(seeds))
        return real(kinds, complexity, seeds, *rest)

    monkeypatch.setattr(argument_env, "generate_scenarios", counting)
    env = ArgumentEnv(ArgumentEnvConfig(train_per_kind=4000, test_per_kind=6))
    assert generated == []
    test_tasks = env.tasks("test")
    assert generated == [6] and len(test_tasks) == 6 * 3  # 6 generator seeds, a triple per kind
    assert env.tasks("test") is test_tasks and generated == [6]

    # A training task from another instance (another process) is still found here.
    train_task = ArgumentEnv(ArgumentEnvConfig(train_per_kind=2, test_per_kind=6)).tasks("train")[0]
    later = ArgumentEnv(ArgumentEnvConfig(train_per_kind=2, test_per_kind=6))
    assert later.scenario(train_task).id == train_task.id
    # A test task from another instance is found without generating the larger training split.
    generated.clear()
    fresh = ArgumentEnv(ArgumentEnvConfig(train_per_kind=4000, test_per_kind=6))
    assert fresh.scenario(test_tasks[0]).id == test_tasks[0].id and generated == [6]
    with pytest.raises(argument_env.ConfigError, match="not 'dev'"):
        env.tasks("dev")


@pytest.mark.parametrize(
    "silence",
    [
        "",
        "I am not sure.",
        '{"argument": "", "abstain": false}',
        # prose without a claim: nothing in the reward reads it
        ply_reply([], [], "c1 is like c2 on F4, so c1 should be decided for the plaintiff."),
    ],
)
def test_a_ply_that_says_nothing_earns_no_more_than_any_wrong_decision(silence):
    """Saying nothing is wrong on both kinds of triple: where the plies can be argued it pays
    the over-abstention penalty as an abstention does, where they must abstain the
    failed-abstention penalty as an argument does; so no reply is paid to stop answering."""
    arguable = TABLE_1
    must_abstain = dataclasses.replace(TABLE_1, kind="mismatched", c2_outcome="D", c3_outcome="P")
    weights = dict.fromkeys(COMPONENTS, 1.0) | {"over_abstention": -0.5, "failed_abstention": -2}
    nothing = parse_ply(silence)
    abstain = parse_ply(ply_reply([], [], "TERMINATE", abstain=True))
    # an argument on a false analogy (c1 lacks F2): it argues, and wrongly, on every ply
    argue = parse_ply(ply_reply([["F2", "c1", "c2"]], [], "c1 is like c2."))

    def reward(scenario, ply):
        return sum(weighted(triple_components(scenario, [ply] * 3), weights).values())

    assert reward(arguable, nothing) == reward(arguable, abstain) == pytest.approx(-0.5)
    assert reward(arguable, argue) == 0.0
    assert reward(must_abstain, nothing) == reward(must_abstain, argue) == pytest.approx(-2.0)
    assert reward(must_abstain, abstain) > 0
