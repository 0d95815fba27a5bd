"""The debate env's scripted teacher and degenerate policies: the teacher's replies parse as the
protocol intends and earn the full reward, fit the CPU demo's token caps, and no degenerate
policy earns more than `SHARE_BOUND` of the teacher's reward on the CPU demo's held-out split;
each new policy does what its name says on a hand-made prompt, without reading the gold."""

import asyncio
import random
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.envs.debate.degenerate import debate_policies
from lexrl.envs.debate.env import DebateEnv, _for_system
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.debate.parsing import decision, position
from lexrl.envs.mcq import format_choices
from lexrl.eval.audit import SHARE_BOUND, TEACHER, audit_env
from lexrl.policy import ScriptedPolicy
from lexrl.train.warmstart import scripted_rows
from lexrl.types import Task

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIG = ROOT / "configs" / "debate_cpu.yaml"
OAB_FIXTURE = Path(__file__).parent / "data" / "oab_fixture.jsonl"


def play(env, task, respond, tokenizer=None):
    return asyncio.run(env.run_episode(task, ScriptedPolicy(tokenizer, task.id, respond)))


def cpu_env() -> DebateEnv:
    return make_env(load_config(CPU_CONFIG).env)


@pytest.mark.parametrize("system", ["single", "vanilla", "irac"])
def test_teacher_argues_gold_and_another_option_and_the_judge_decides_gold(system):
    env = DebateEnv(DebateEnvConfig(format_weight=0.2))
    rng = random.Random(0)
    for question in env.questions("test")[:8]:
        task = _for_system(question, system, tagged=True)
        n = task.meta["n_options"]
        trajectory = play(env, task, env.teacher(task, rng))
        texts = {role: [t.text for t in trajectory.turns if t.role == role] for role in env.roles}
        assert [decision(text, n) for text in texts["judge"]] == [task.gold]
        assert trajectory.components == {"correct": 1.0, "format": 0.2, "invalid": 0.0}
        if system == "single":
            continue
        assert len(texts["debater_x"]) == len(texts["debater_y"]) == 2  # no re-ask
        assert {position(text, n) for text in texts["debater_x"]} == {task.gold}
        (y,) = {position(text, n) for text in texts["debater_y"]}
        assert y is not None and y != task.gold
        assert trajectory.outcome["x"] == task.gold and trajectory.outcome["y"] == y
        assert trajectory.metrics["judge_follows_x"] == 1.0


def test_teacher_draws_y_with_the_rng_across_every_other_option():
    env = DebateEnv(DebateEnvConfig())
    task = _for_system(env.questions("test")[0], "irac", tagged=True)
    rng = random.Random(0)
    ys = {play(env, task, env.teacher(task, rng)).outcome["y"] for _ in range(30)}
    assert ys == set(range(task.meta["n_options"])) - {task.gold}


def test_open_ended_teacher_answers_with_the_reference_and_its_citations():
    env = DebateEnv(
        DebateEnvConfig(dataset="oab", source=str(OAB_FIXTURE), rubric_weight=0, eval_fraction=0.5)
    )
    for task in env.tasks("test"):
        trajectory = play(env, task, env.teacher(task, random.Random(0)))
        assert trajectory.metrics["citation_f1"] == 1.0
        assert trajectory.reward == env.config.citation_weight


def test_teacher_episodes_are_warm_start_rows(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    rows = scripted_rows(DebateEnv(DebateEnvConfig()), tokenizer, 3, seed=0)
    # irac training episodes: X and Y open and rebut, the judge decides
    roles = ["debater_x", "debater_y", "debater_x", "debater_y", "judge"]
    assert [row.role for row in rows] == roles * 3
    assert all(row.completion_ids[-1] == tokenizer.eos_token_id for row in rows)


@pytest.mark.slow
def test_teacher_replies_fit_the_cpu_demos_token_caps(smollm2_path):
    """Every CPU demo question under every system, SmolLM2's tokenizer: a reply is cut when its
    tokens and the end-of-sequence token exceed its role's cap (at most 5% may be)."""
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path)
    env = cpu_env()
    caps = {"judge": env.config.judge_max_new_tokens}
    rng = random.Random(0)
    lengths = []
    for question in env.questions("train") + env.questions("test"):
        for system in ("single", "vanilla", "irac"):
            task = _for_system(question, system, tagged=True)
            trajectory = play(env, task, env.teacher(task, rng), tokenizer)
            for turn in trajectory.turns:
                cap = caps.get(turn.role, env.config.debater_max_new_tokens)
                lengths.append((len(turn.completion_ids), cap))
    cut = sum(length > cap for length, cap in lengths) / len(lengths)
    assert len(lengths) > 1000 and cut <= 0.05, cut


def test_no_degenerate_policy_earns_the_bound_of_the_teacher_on_the_cpu_test_split():
    env = cpu_env()
    rows = audit_env("debate", env, env.tasks("test"), None)
    assert rows[0].policy == TEACHER and rows[0].mean_reward == pytest.approx(1.2)
    assert set(env.degenerate_policies()) <= {row.policy for row in rows[1:]}
    over = {row.policy: row.share for row in rows[1:] if row.share > SHARE_BOUND}
    assert not over


def test_the_audit_catches_the_shortest_option_on_the_course_split():
    """Held out by whole courses, the sample's test questions mostly have the shortest option
    right: the audit flags it (why `lexam_split` defaults to `facts` for the sample)."""
    env = make_env(load_config(CPU_CONFIG, ["--env.lexam_split", "course"]).env)
    rows = {row.policy: row for row in audit_env("debate", env, env.tasks("test"), None)}
    assert rows["shortest_option"].share > SHARE_BOUND
    assert rows["shortest_option"].headline == pytest.approx(0.7)


# -- the degenerate policies on a hand-made judge prompt ---------------------------------------

STEM = "Question: What does the tenant owe besides the deposit?"
OPTIONS = [
    "rent, notice and fee",
    "rent",
    "the landlord's repair of the roof",
    "tenant deposit fee",
]
QUESTION = STEM + format_choices(OPTIONS)
JUDGE_PROMPT = (
    f"{QUESTION}\n\nDebater X's (for option A) rebuttal:\n###A### I argue for option A.\n\n"
    "Debater Y's (for option C) rebuttal:\n###C### Option C holds; option C is right.\n\n"
    "Your decision:"
)
DEBATER_PROMPT = f"{QUESTION}\n\nYour opening statement:"


def replies(name: str, seed: int = 0, gold: int = 0) -> tuple[int, int, int]:
    """X's and Y's letters on `DEBATER_PROMPT` and the judge's on `JUDGE_PROMPT`."""
    task = Task("q/irac", {}, gold, {"n_options": 4, "system": "irac"})
    respond = debate_policies(False)[name](task, random.Random(seed))
    return (
        position(respond("debater_x", DEBATER_PROMPT), 4),
        position(respond("debater_y", DEBATER_PROMPT), 4),
        decision(respond("judge", JUDGE_PROMPT), 4),
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # 20, 4, 33 and 18 characters
        ("shortest_option", (1, 3, 1)),
        ("longest_option", (2, 0, 2)),
        # words shared with the stem: D 2 (tenant, deposit), C 1 (the), A and B none
        ("most_question_overlap_option", (3, 2, 3)),
        # with the other options: A 2 (rent with B, fee with D), B and D 1, C none; ties in
        # label order
        ("most_shared_words_option", (0, 1, 0)),
    ],
)
def test_option_rankings_argue_and_decide_what_they_say(name, expected):
    assert replies(name) == expected


def test_judges_follow_the_side_their_name_says():
    for seed in range(5):
        x, y, _ = replies("random_sides_judge_follows_x", seed)
        assert x != y
        # the judge reads the hand-made debate, whatever its own debaters argued
        assert replies("random_sides_judge_follows_x", seed)[2] == 0
        assert replies("random_sides_judge_follows_y", seed)[2] == 2
        assert replies("random_sides_judge_most_mentioned", seed)[2] == 2  # C 4 times, A 3
        assert replies("random_sides_judge_neither", seed)[2] in {1, 3}
    drawn = {replies("random_sides_judge_follows_x", seed)[:2] for seed in range(20)}
    assert len(drawn) > 4  # the rng draws the sides


@pytest.mark.parametrize("name", list(debate_policies(False)))
def test_no_policy_reads_the_gold(name):
    assert replies(name, gold=0) == replies(name, gold=3)
