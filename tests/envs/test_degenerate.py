"""Every env's degenerate policies, played through its real workflow: each one finishes its
episodes, and the cheap strategies score what can be worked out by hand from the gold labels."""

import asyncio
import random

import pytest
from transformers import AutoTokenizer

from lexrl.envs import make_env
from lexrl.envs.argument.env import ArgumentEnv
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.debate.env import DebateEnv
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.gdpr.degenerate import majority_labels
from lexrl.envs.gdpr.env import GdprEnv
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.envs.mixture_options import MixEnvConfig, MixMember
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge_config import JudgeConfig
from lexrl.rewards.reference_judge import BUILTIN_URL

ENVS = {
    "statute": lambda: make_env(StatuteEnvConfig()),
    "argument_MA": lambda: ArgumentEnv(ArgumentEnvConfig(workflow="MA", test_per_kind=2)),
    "argument_RMA": lambda: ArgumentEnv(ArgumentEnvConfig(workflow="RMA", test_per_kind=2)),
    "argument_SA": lambda: ArgumentEnv(ArgumentEnvConfig(workflow="SA", test_per_kind=2)),
    "gdpr": lambda: GdprEnv(GdprEnvConfig(eval_grid=["none"])),
    "lexam_mcq": lambda: LexamEnv(LexamEnvConfig()),
    "lexam_open": lambda: LexamEnv(
        LexamEnvConfig(
            config="open_question", judges=[JudgeConfig(BUILTIN_URL, "reference-overlap")]
        )
    ),
    "lexam_open_self_judged": lambda: LexamEnv(LexamEnvConfig(config="open_question")),
    "debate": lambda: DebateEnv(DebateEnvConfig()),
}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


def play(env, tasks, tokenizer, name):
    factory = env.degenerate_policies()[name]
    rng = random.Random(0)

    async def episodes():
        return [
            await env.run_episode(task, ScriptedPolicy(tokenizer, task.id, factory(task, rng)))
            for task in tasks
        ]

    return asyncio.run(episodes())


@pytest.mark.parametrize("kind", ENVS)
def test_every_policy_finishes_its_episodes(kind, tokenizer):
    env = ENVS[kind]()
    policies = env.degenerate_policies()
    assert {"empty", "echo"} <= set(policies)
    assert len(policies) > 2 or kind == "lexam_open"
    tasks = env.tasks("test")[:2]
    # A self-judging policy's empty or echoed judgment has no score: the episode fails, as it
    # should. Only the self-grade plays the judge with one.
    skip = {"empty", "echo", "boilerplate"} if kind == "lexam_open_self_judged" else set()
    for name in set(policies) - skip:
        for trajectory in play(env, tasks, tokenizer, name):
            assert trajectory.failed is None, (kind, name, trajectory.failed)
            assert trajectory.turns, (kind, name)


@pytest.mark.parametrize("letter", "ABCD")
def test_lexam_always_one_letter_is_right_on_that_letters_questions(letter, tokenizer):
    env = LexamEnv(LexamEnvConfig(format_weight=0.2))
    tasks = env.tasks("test")[:12]
    trajectories = play(env, tasks, tokenizer, f"always_{letter}")
    share = sum(task.gold == "ABCD".index(letter) for task in tasks) / len(tasks)
    assert sum(t.components["correct"] for t in trajectories) / len(tasks) == pytest.approx(share)
    # The format credit is chance-normalised: +1 right, -1/3 wrong (4 options), times 0.2.
    right = "ABCD".index(letter)
    assert [t.components["format"] for t in trajectories] == pytest.approx(
        [0.2 if task.gold == right else -0.2 / 3 for task in tasks]
    )


def penalised_argument_env() -> ArgumentEnv:
    """The MA argument env on 9 test triples, with both abstention penalties set."""
    return ArgumentEnv(
        ArgumentEnvConfig(
            workflow="MA",
            test_per_kind=3,
            over_abstention_penalty=0.5,
            failed_abstention_penalty=2.0,
        )
    )


def test_argument_always_abstain_earns_the_abstentions_it_owes(tokenizer):
    env = penalised_argument_env()
    tasks = env.tasks("test")
    for task, trajectory in zip(tasks, play(env, tasks, tokenizer, "always_abstain"), strict=True):
        owed = sum(task.gold["abstain"]) / 3
        # Only the plies that owe an abstention earn, abstention and format; an abstention
        # claims nothing, so it earns no hallucination credit, and uses no factor. The others
        # pay the over-abstention penalty.
        weights = env.weights
        assert trajectory.components == pytest.approx(
            {
                "abstention": weights["abstention"] * owed,
                "hallucination": 0.0,
                "utilisation": 0.0,
                "format": weights["format"] * owed,
                "over_abstention": -0.5 * (1 - owed),
                "failed_abstention": 0.0,
            }
        )


def test_argument_never_abstaining_pays_for_each_abstention_it_owes(tokenizer):
    env = penalised_argument_env()
    tasks = env.tasks("test")
    played = play(env, tasks, tokenizer, "never_abstain_claiming_nothing")
    owing = 0
    for task, trajectory in zip(tasks, played, strict=True):
        owed = sum(task.gold["abstain"]) / 3
        owing += owed > 0
        # It claims nothing, so no ply decides rightly and nothing earns: every ply that owed an
        # abstention pays the failed-abstention penalty (2 per share of plies), and every other
        # one, arguing nothing where it can argue, the over-abstention penalty (0.5 per share):
        # its prose alone is saying nothing.
        assert trajectory.components == pytest.approx(
            dict.fromkeys(env.weights, 0.0)
            | {"failed_abstention": -2.0 * owed, "over_abstention": -0.5 * (1 - owed)}
        )
    assert owing >= 6  # the mismatched and non-arguable triples, at least


def test_gdpr_majority_label_is_right_where_the_gold_is_the_majority(tokenizer):
    env = GdprEnv(GdprEnvConfig(eval_grid=["none"]))
    tasks = env.tasks("test")
    majority = majority_labels(env.tasks("train"))
    trajectories = play(env, tasks, tokenizer, "majority_label")
    expected = [float(task.gold == majority[task.inputs["kind"]]) for task in tasks]
    assert [t.metrics["accuracy"] for t in trajectories] == expected


def test_statute_exit_at_once_retrieves_nothing_and_pays_the_early_exit(tokenizer):
    env = make_env(StatuteEnvConfig())
    for trajectory in play(env, env.tasks("test")[:3], tokenizer, "exit_at_once"):
        assert trajectory.metrics["retrieval_calls"] == 0
        assert trajectory.components["early_exit"] == -env.config.early_exit_penalty


def test_debate_y_repeating_xs_letter_is_invalid_and_penalised(tokenizer):
    env = DebateEnv(DebateEnvConfig(invalid_penalty=0.5))
    tasks = [t for t in env.tasks("test") if t.meta["system"] != "single"][:4]
    for task, trajectory in zip(tasks, play(env, tasks, tokenizer, "always_A"), strict=True):
        assert trajectory.outcome["y_invalid"]
        assert trajectory.metrics["accuracy"] == float(task.gold == 0)
        assert trajectory.components["invalid"] == -0.5


def test_the_mixture_forwards_the_policies_its_members_share(tokenizer):
    config = MixEnvConfig(
        members=[
            MixMember(env=GdprEnvConfig(eval_grid=["none"]), weight=1.0),
            MixMember(env=ArgumentEnvConfig(test_per_kind=1), weight=1.0),
        ]
    )
    env = make_env(config)
    assert set(env.degenerate_policies()) == {"empty", "echo"}
    for task in env.tasks("test")[:2] + env.tasks("test")[-2:]:
        trajectory = play(env, [task], tokenizer, "echo")[0]
        assert trajectory.failed is None
