"""The LEXam env's episodes, played by scripted policies: rewards, workflows, judges."""

import asyncio

import pytest
from transformers import AutoTokenizer

from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.errors import ConfigError
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge import JudgeClient, JudgeConfig
from tests.env_options import load_env
from tests.rewards.test_judge import FakeServer


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


def play(env, task, tokenizer, replies):
    """One episode whose every `chat` answers with the next reply for its role."""
    asked = []

    def teacher(role, messages):
        asked.append((role, messages))
        return replies[role].pop(0)

    policy = ScriptedPolicy(tokenizer, task.id, teacher)
    return asyncio.run(env.run_episode(task, policy)), asked


def test_the_shipped_mcq_sample_splits_by_facts_within_every_course():
    env = LexamEnv(LexamEnvConfig())
    train, test = env.tasks("train"), env.tasks("test")
    assert len(train) + len(test) == 150
    assert not {t.id for t in train} & {t.id for t in test}
    stats = env.stats()
    assert stats["split"] == "facts" and stats["test"]["questions"] == len(test) > 0
    assert set(stats["train"]["courses"]) == set(stats["test"]["courses"])
    with pytest.raises(ValueError, match="splits train, test"):
        env.tasks("dev")


def test_a_course_split_is_the_default_elsewhere_and_can_be_asked_for():
    courses = [
        {t.meta["course"] for t in env.tasks(split)}
        for env in (open_env(), LexamEnv(LexamEnvConfig(split="course")))
        for split in ("train", "test")
    ]
    assert not courses[0] & courses[1] and not courses[2] & courses[3]
    with pytest.raises(ConfigError, match="`env.split` is 'question'"):
        load_env("lexam", split="question")


def test_mcq_rewards_the_last_marker_and_credits_the_format_beyond_chance(tokenizer):
    env = LexamEnv(LexamEnvConfig(format_weight=0.3))
    task = env.tasks("test")[0]
    right, wrong = "ABCD"[task.gold], "ABCD"[(task.gold + 1) % 4]
    trajectory, asked = play(
        env, task, tokenizer, {"examinee": [f"###{wrong}### no, ###{right}###"]}
    )
    assert trajectory.components == {"correct": 1.0, "format": pytest.approx(0.3)}
    assert trajectory.reward == pytest.approx(1.3) and trajectory.metrics["accuracy"] == 1.0
    prompt = asked[0][1][0]["content"]
    assert task.inputs["question"] in prompt and "\nA. " in prompt and "\nD. " in prompt
    trajectory, _ = play(env, task, tokenizer, {"examinee": [f"###{wrong}###"]})
    assert trajectory.components == {"correct": 0.0, "format": pytest.approx(-0.1)}
    assert trajectory.metrics == {"accuracy": 0.0, "parsed": 1.0}
    # No marker is wrong, in the format credit too: never paid more than a marked wrong letter.
    trajectory, _ = play(env, task, tokenizer, {"examinee": [f"I think {right}."]})
    assert trajectory.components == {"correct": 0.0, "format": pytest.approx(-0.1)}
    assert trajectory.metrics == {"accuracy": 0.0, "parsed": 0.0}


def test_draft_review_answers_with_the_reviewers_marker(tokenizer):
    env = LexamEnv(LexamEnvConfig(workflow="draft_review"))
    task = env.tasks("train")[0]
    right, wrong = "ABCD"[task.gold], "ABCD"[(task.gold + 1) % 4]
    replies = {"examinee": [f"###{wrong}###"], "reviewer": [f"The draft errs. ###{right}###"]}
    trajectory, asked = play(env, task, tokenizer, replies)
    assert [role for role, _ in asked] == ["examinee", "reviewer"]
    assert f"###{wrong}###" in asked[1][1][0]["content"]
    assert trajectory.metrics == {"accuracy": 1.0, "parsed": 1.0, "draft_accuracy": 0.0}
    assert [turn.role for turn in trajectory.turns] == ["examinee", "reviewer"]


def open_env(**options):
    return LexamEnv(LexamEnvConfig(config="open_question", **options))


def test_the_policy_judges_open_answers_and_a_failed_judgment_fails_the_episode(tokenizer):
    env = open_env()
    task = env.tasks("test")[0]
    replies = {"examinee": ["<think>draft</think>Art. 41 OR applies."], "judge": ["Good. [[0.7]]"]}
    trajectory, asked = play(env, task, tokenizer, replies)
    judge_prompt = asked[1][1][0]["content"]
    assert "Art. 41 OR applies." in judge_prompt and "<think>" not in judge_prompt
    assert task.gold in judge_prompt
    assert trajectory.reward == pytest.approx(0.7) and trajectory.failed is None
    assert [(t.role, t.trainable) for t in trajectory.turns] == [
        ("examinee", True),
        ("judge", False),
    ]

    replies = {"examinee": ["An answer."], "judge": ["No score.", "Still none.", "Nope."]}
    trajectory, asked = play(env, task, tokenizer, replies)
    assert [role for role, _ in asked] == ["examinee", "judge", "judge", "judge"]
    assert "[[" in asked[2][1][-1]["content"]  # the re-ask states the format
    assert trajectory.failed.startswith("judge failed") and trajectory.components == {}


def test_endpoint_judges_take_the_minimum_and_are_recorded(tokenizer, tmp_path):
    server = FakeServer({"judge-a": ["Fine. [[0.8]]"], "judge-b": ["Weak. [[0.3]]"]})
    configs = [JudgeConfig("http://judge.test/v1", model) for model in ("judge-a", "judge-b")]
    env = open_env(judges=configs, judge_cache_dir=str(tmp_path))
    env.__dict__["judge_client"] = JudgeClient(
        configs, tmp_path, "min", http_client_factory=server.http_client
    )
    task = env.tasks("test")[0]
    trajectory, _ = play(env, task, tokenizer, {"examinee": ["Art. 41 OR."]})
    assert trajectory.reward == pytest.approx(0.3) and len(server.requests) == 2
    judged = [turn for turn in trajectory.turns if turn.role == "judge"]
    assert {turn.text for turn in judged} == {"Fine. [[0.8]]", "Weak. [[0.3]]"}
    assert not any(turn.trainable for turn in judged)
    assert {step["judge"]["judge"] for step in trajectory.steps} == {"judge-a", "judge-b"}


def test_a_judge_endpoint_that_stays_down_fails_the_episode(tokenizer, tmp_path):
    server = FakeServer({"judge-a": [(503, "down")]})
    configs = [JudgeConfig("http://judge.test/v1", "judge-a", max_retries=1)]
    env = open_env(judges=configs)
    env.__dict__["judge_client"] = JudgeClient(
        configs, tmp_path, "min", http_client_factory=server.http_client
    )
    trajectory, _ = play(env, env.tasks("test")[0], tokenizer, {"examinee": ["An answer."]})
    assert trajectory.failed and "503" in trajectory.failed and trajectory.components == {}
    assert len(server.requests) == 2  # the first try and one retry by the openai client


def test_the_brief_prompt_shows_one_worked_example_before_the_question(tokenizer):
    env = LexamEnv(LexamEnvConfig(prompt="brief"))
    labels = set()
    for task in env.tasks("train")[:12]:
        _, asked = play(env, task, tokenizer, {"examinee": ["###A###"]})
        example, answer, question = asked[0][1]
        assert [m["role"] for m in (example, answer, question)] == ["user", "assistant", "user"]
        assert task.inputs["question"] in question["content"]
        label = answer["content"].strip("#")
        assert f"\n{label}. The Federal Supreme Court" in example["content"]
        labels.add(label)
    assert len(labels) > 1, "the example's answer letter should vary with the task"


def test_the_report_breaks_accuracy_down_and_counts_failed_judgments(tokenizer):
    from lexrl.envs.base import ReportRequest
    from lexrl.types import Group

    request = ReportRequest("test", "scripted", None)
    env = LexamEnv(LexamEnvConfig())
    tasks = env.tasks("test")[:2]
    groups = []
    for task in tasks:
        right, wrong = "ABCD"[task.gold], "ABCD"[(task.gold + 1) % 4]
        answers = [f"###{right}###", f"###{wrong}###", "no marker"]
        trajectories = [play(env, task, tokenizer, {"examinee": [a]})[0] for a in answers]
        groups.append(Group(task, trajectories))
    written = env.report(tasks, groups, request)
    report = written.data
    assert "| 4 options | 6 |" in written.markdown
    assert report["n"] == 6 and report["accuracy"]["mean"] == pytest.approx(2 / 6)
    assert report["parse_rate"] == pytest.approx(4 / 6)
    assert report["by_n_options"][4]["n"] == 6 and report["by_language"]["en"]["n"] == 6

    env = open_env()
    task = env.tasks("test")[0]
    scored, _ = play(env, task, tokenizer, {"examinee": ["A."], "judge": ["[[0.6]]"]})
    failed, _ = play(env, task, tokenizer, {"examinee": ["B."], "judge": ["x", "y", "z"]})
    report = env.report([task], [Group(task, [scored, failed])], request).data
    assert report["failed"] == 1 and report["score"]["mean"] == pytest.approx(60.0)


@pytest.mark.parametrize("prompt", ["paper", "brief"])
def test_the_mcq_teacher_answers_the_gold_label_with_the_prompts_marker(tokenizer, prompt):
    env = LexamEnv(LexamEnvConfig(prompt=prompt, workflow="draft_review"))
    for task in env.tasks("train")[:5]:
        policy = ScriptedPolicy(tokenizer, task.id, env.teacher(task, None))
        trajectory = asyncio.run(env.run_episode(task, policy))
        assert trajectory.metrics["accuracy"] == 1.0 and trajectory.metrics["parsed"] == 1.0
        assert trajectory.metrics["draft_accuracy"] == 1.0


def test_the_open_teacher_writes_the_reference_and_as_judge_scores_it_1(tokenizer):
    env = open_env()  # no judges: the policy judges, here the teacher
    task = env.tasks("train")[0]
    trajectory = asyncio.run(
        env.run_episode(task, ScriptedPolicy(tokenizer, task.id, env.teacher(task, None)))
    )
    assert trajectory.outcome["answer"] == task.gold and trajectory.reward == 1.0


def test_the_open_teacher_cuts_the_reference_to_teacher_max_words(tokenizer):
    env = open_env(teacher_max_words=5)
    task = next(t for t in env.tasks("train") if len(t.gold.split()) > 5)
    answer = env.teacher(task, None)("examinee", [])
    assert answer.split() == task.gold.split()[:5]
