"""The debate env played by scripted policies: the protocol's turn order and what each agent
reads, "Y must differ", cooperative and adversarial rewards against hand computations, the
systems on the same held-out questions, the report's persuasion numbers, gold kept out of
prompts, the external judge, and the OAB open-ended path on the fixture."""

import asyncio
import json
import re
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from lexrl.envs.base import ReportRequest
from lexrl.envs.debate.citations import extract_citations
from lexrl.envs.debate.env import DebateEnv
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.lexam.data import passages
from lexrl.errors import ConfigError, DatasetError
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge import JudgeClient, JudgeConfig
from lexrl.types import Group, Task
from tests.env_options import load_env
from tests.rewards.test_judge import FakeServer

OAB_FIXTURE = Path(__file__).parent / "data" / "oab_fixture.jsonl"


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def env():
    return DebateEnv(DebateEnvConfig())


class RecordingPolicy(ScriptedPolicy):
    """A scripted policy that also keeps every (role, system prompt, messages) it is asked."""

    def __init__(self, tokenizer, task_id, respond):
        super().__init__(tokenizer, task_id, respond)
        self.asked = []

    async def chat(self, role, system, messages, **kwargs):
        self.asked.append((role, system, messages))
        return await super().chat(role, system, messages, **kwargs)


def play(env, task, tokenizer, respond):
    """One episode whose every `chat` is answered by `respond(role, messages)`; returns the
    trajectory and the (role, system prompt, messages) asked."""
    policy = RecordingPolicy(tokenizer, task.id, respond)
    return asyncio.run(env.run_episode(task, policy)), policy.asked


def mcq(gold=0, system="irac", n=4):
    return Task(
        id=f"q/{system}",
        inputs={
            "question": "Is a promise without consideration enforceable?",
            "choices": [f"choice {i}" for i in range(n)],
            "subject": "Contracts",
        },
        gold=gold,
        meta={"subject": "Contracts", "n_options": n, "system": system, "question_id": "q"},
    )


def letters(x="A", y="B", judge="B", y_retry=None):
    """A respond function: X opens for `x`, Y for `y` (then `y_retry` when re-asked), the judge
    ends with `judge`."""

    def respond(role, messages):
        if role == "debater_x":
            return f"###{x}### X argues." if "opening statement" in _text(messages) else "X rebuts."
        if role == "debater_y":
            if isinstance(messages, list) and len(messages) > 1:
                return f"###{y_retry}### Y again." if y_retry else "Y again, no label."
            if "opening statement" in _text(messages):
                return f"###{y}### Y argues." if y else "Y argues with no label."
            return "Y rebuts."
        return f"I weigh both. ###{judge}###" if judge else "No decision."

    return respond


def _text(messages):
    return messages if isinstance(messages, str) else messages[-1]["content"]


def test_protocol_order_and_what_each_agent_reads(env, tokenizer):
    trajectory, asked = play(env, mcq(), tokenizer, letters())
    assert [role for role, _, _ in asked] == [
        "debater_x",
        "debater_y",
        "debater_x",
        "debater_y",
        "judge",
    ]
    assert "IRAC" in asked[0][1] and "Debater X" in asked[0][1]
    y_opening = _text(asked[1][2])
    assert "###A### X argues." in y_opening and "one of B, C, D" in y_opening
    x_rebuttal, y_rebuttal = _text(asked[2][2]), _text(asked[3][2])
    assert "###B### Y argues." in x_rebuttal and "Your rebuttal" in x_rebuttal
    assert "X rebuts." in y_rebuttal and "Your rebuttal" in y_rebuttal
    judge = _text(asked[4][2])
    # the judge reads the question and both rebuttals, not the openings
    assert "X rebuts." in judge and "Y rebuts." in judge and "X argues" not in judge
    assert "choice 3" in judge
    assert [t.temperature for t in trajectory.turns] == [0.7, 0.7, 0.7, 0.7, 0.1]
    assert trajectory.outcome["x"] == 0 and trajectory.outcome["y"] == 1
    assert trajectory.outcome["judge"] == 1 and trajectory.reward == 0.0


def test_vanilla_and_single_systems_use_their_prompts(env, tokenizer):
    _, asked = play(env, mcq(system="vanilla"), tokenizer, letters())
    assert all("IRAC" not in system for _, system, _ in asked)
    trajectory, asked = play(env, mcq(system="single"), tokenizer, letters(judge="A"))
    assert [role for role, _, _ in asked] == ["judge"]
    assert trajectory.reward == 1.0 and trajectory.metrics == {"accuracy": 1.0, "parsed": 1.0}


def test_y_must_differ_reasked_once_then_penalised(tokenizer):
    env = DebateEnv(DebateEnvConfig(invalid_penalty=0.5))
    trajectory, asked = play(env, mcq(), tokenizer, letters(x="A", y="A", y_retry="C", judge="A"))
    roles = [role for role, _, _ in asked]
    assert roles == ["debater_x", "debater_y", "debater_y", "debater_x", "debater_y", "judge"]
    reask = asked[2][2][-1]["content"]
    assert "Debater X's option" in reask and "one of B, C, D" in reask
    assert trajectory.outcome["y"] == 2 and not trajectory.outcome["y_invalid"]
    # the refused opening is kept for the record but not trained
    assert [t.trainable for t in trajectory.turns if t.role == "debater_y"] == [False, True, True]
    assert trajectory.components == {"correct": 1.0, "format": 0.0, "invalid": -0.0}

    trajectory, asked = play(env, mcq(), tokenizer, letters(x="A", y="A", y_retry="A", judge="A"))
    assert trajectory.outcome["y_invalid"] and trajectory.outcome["y"] is None
    assert trajectory.components["invalid"] == -0.5 and trajectory.reward == 0.5
    assert trajectory.metrics["y_valid"] == 0.0

    trajectory, asked = play(env, mcq(), tokenizer, letters(x="A", y=None, y_retry=None))
    assert "named no option" in asked[2][2][-1]["content"]
    assert trajectory.outcome["y_invalid"]


def test_adversarial_role_rewards_equal_a_hand_computation(tokenizer):
    env = DebateEnv(
        DebateEnvConfig(reward_mode="adversarial", format_weight=0.1, invalid_penalty=0.5)
    )
    # gold A; X argues A (right), Y argues B and persuades the judge (B)
    trajectory, _ = play(env, mcq(gold=0), tokenizer, letters(x="A", y="B", judge="B"))
    assert trajectory.role_rewards == pytest.approx(
        {"debater_x": 0.1, "debater_y": 1.1, "judge": 0.1}
    )
    assert trajectory.components == pytest.approx({"correct": 0.0, "format": 0.1, "invalid": 0})
    # gold C; X argues A, Y stays on A after the re-ask, the judge finds C; X's label parsed,
    # Y's did (it is just not allowed), the judge's did
    trajectory, _ = play(env, mcq(gold=2), tokenizer, letters(x="A", y="A", y_retry="A", judge="C"))
    assert trajectory.role_rewards == pytest.approx(
        {"debater_x": 1.1, "debater_y": -0.4, "judge": 1.1}
    )
    # the judge gives no label: nobody is right and Y persuaded nobody
    trajectory, _ = play(env, mcq(gold=0), tokenizer, letters(x="A", y="B", judge=None))
    assert trajectory.role_rewards == pytest.approx(
        {"debater_x": 0.1, "debater_y": 0.1, "judge": 0.0}
    )


def test_cooperative_mode_gives_every_role_the_episode_reward(tokenizer):
    env = DebateEnv(DebateEnvConfig(format_weight=0.3))
    trajectory, _ = play(env, mcq(gold=1), tokenizer, letters(x="A", y="B", judge="B"))
    assert trajectory.role_rewards == {}
    assert trajectory.reward == pytest.approx(1.0 + 0.3)


def test_gold_never_reaches_a_prompt(env, tokenizer):
    """The same question with another gold option gives token-identical prompts."""
    seen = []
    for gold in range(4):
        trajectory, _ = play(env, mcq(gold=gold), tokenizer, letters())
        seen.append([turn.prompt_ids for turn in trajectory.turns])
    assert all(prompts == seen[0] for prompts in seen)


def test_test_split_holds_every_system_on_the_same_questions(env):
    test = env.tasks("test")
    questions = env.questions("test")
    assert len(test) == 3 * len(questions) and len(questions) >= 10
    assert [t.meta["system"] for t in test[:3]] == ["single", "vanilla", "irac"]
    assert len({t.id for t in test}) == len(test)
    assert {t.meta["question_id"] for t in test[:3]} == {questions[0].id}
    train = env.tasks("train")
    assert {t.meta["system"] for t in train} == {"irac"}
    # The sample's default split holds out every course in proportion, no statement on both sides.
    assert env.lexam_split == "facts"
    subjects = {t.meta["subject"] for t in questions}
    assert subjects == {t.meta["subject"] for t in train}
    statements = set().union(*(passages(t.inputs["question"]) for t in questions))
    assert not statements & set().union(*(passages(t.inputs["question"]) for t in train))


def test_the_course_split_holds_out_whole_courses():
    env = DebateEnv(DebateEnvConfig(lexam_split="course"))
    held = {t.meta["subject"] for t in env.questions("test")}
    assert held and not held & {t.meta["subject"] for t in env.questions("train")}
    with pytest.raises(ConfigError, match="`env.lexam_split` is 'question'"):
        load_env("debate", lexam_split="question")


def test_report_counts_persuasion_on_hand_made_episodes(env, tokenizer):
    """Four debates (gold A): X right & judge right, X right & judge persuaded to Y, X wrong &
    judge recovers, X wrong & judge follows X; plus one single-agent episode."""
    plays = [
        letters(x="A", y="B", judge="A"),
        letters(x="A", y="B", judge="B"),
        letters(x="C", y="D", judge="A"),
        letters(x="C", y="D", judge="C"),
    ]
    groups = []
    for number, respond in enumerate(plays):
        task = mcq(gold=0)
        task.id = f"q{number}/irac"
        groups.append(Group(task, [play(env, task, tokenizer, respond)[0]]))
    single = mcq(gold=0, system="single")
    groups.append(Group(single, [play(env, single, tokenizer, letters(judge="D"))[0]]))
    report = env.report([g.task for g in groups], groups, ReportRequest("test", "scripted", None))
    irac = report.data["systems"]["irac"]
    assert irac["n"] == 4 and irac["accuracy"]["mean"] == 50.0
    assert irac["x_accuracy"]["mean"] == 50.0
    assert irac["follows_x"]["mean"] == 50.0 and irac["follows_y"]["mean"] == 25.0
    assert irac["persuaded"]["mean"] == 50.0 and irac["n_persuaded"] == 2
    assert irac["recovered"]["mean"] == 50.0 and irac["n_recovered"] == 2
    assert report.data["systems"]["single"]["accuracy"]["mean"] == 0.0
    assert report.data["systems"]["single"]["persuaded"] is None
    assert "MAD-IRAC (scripted)" in report.markdown and "single agent" in report.markdown


def test_external_judge_turns_are_recorded_not_trained(tmp_path, tokenizer):
    judges = [JudgeConfig("http://judge.test/v1", "judge-model")]
    env = DebateEnv(DebateEnvConfig(judge="external", judges=judges, judge_cache_dir=None))
    assert env.roles == ("debater_x", "debater_y")
    server = FakeServer({"judge-model": ["I cannot decide.", "Then: ###D###"]})
    env.__dict__["judge_client"] = JudgeClient(judges, None, http_client_factory=server.http_client)
    trajectory, asked = play(env, mcq(gold=3), tokenizer, letters())
    assert [role for role, _, _ in asked] == ["debater_x", "debater_y", "debater_x", "debater_y"]
    judge_turns = [turn for turn in trajectory.turns if turn.role == "judge"]
    assert len(judge_turns) == 1 and not judge_turns[0].trainable
    assert trajectory.outcome["judge"] == 3 and trajectory.reward == 1.0
    assert len(server.requests) == 2  # the unlabelled judgment was re-asked once

    failing = DebateEnv(DebateEnvConfig(judge="external", judges=judges, judge_cache_dir=None))
    server = FakeServer({"judge-model": [(500, "down")]})
    failing.__dict__["judge_client"] = JudgeClient(
        [JudgeConfig("http://judge.test/v1", "judge-model", max_retries=0)],
        None,
        http_client_factory=server.http_client,
    )
    trajectory, _ = play(failing, mcq(), tokenizer, letters())
    assert trajectory.failed and "external judge failed" in trajectory.failed


def test_open_ended_oab_rewards_rubric_and_citations(tmp_path, tokenizer):
    rubric_judges = [JudgeConfig("http://judge.test/v1", "rubric-model")]
    env = DebateEnv(
        DebateEnvConfig(
            dataset="oab",
            source=str(OAB_FIXTURE),
            rubric_judges=rubric_judges,
            judge_cache_dir=str(tmp_path),
            eval_fraction=0.5,
        )
    )
    questions = env.questions("train") + env.questions("test")
    assert len(questions) == 6
    assert {t.meta["system"] for t in env.tasks("test")} == {"single", "vanilla", "irac"}
    task = next(t for t in questions if t.id == "oab-fixture-01")
    debate = Task(task.id, task.inputs, task.gold, {**task.meta, "system": "irac"})
    reply = "<correctness>3</correctness><reasoning>2</reasoning><citations>2</citations>"
    server = FakeServer({"rubric-model": [reply]})
    env.__dict__["rubric_client"] = JudgeClient(
        rubric_judges, tmp_path, http_client_factory=server.http_client
    )
    answer = "Cabe mandado de segurança (art. 5º, LXIX, da CF/88) e a Lei 8.112/90 não se aplica."

    def respond(role, messages):
        return answer if role == "judge" else "Argumento."

    trajectory, asked = play(env, debate, tokenizer, respond)
    # expected: art. 5 LXIX CF/88 and art. 23 Lei 12.016/2009; answered: art. 5 LXIX CF/88
    # and Lei 8.112/1990 -> precision 1/2, recall 1/2, F1 1/2; rubric (3 + 2 + 2) / 11
    assert trajectory.metrics["citation_precision"] == pytest.approx(0.5)
    assert trajectory.metrics["citation_f1"] == pytest.approx(0.5)
    assert trajectory.components == pytest.approx({"rubric": 7 / 11, "citation_f1": 0.5})
    rubric_turns = [t for t in trajectory.turns if t.role == "rubric_judge"]
    assert len(rubric_turns) == 1 and not rubric_turns[0].trainable
    reference = task.gold["reference"]
    for turn in trajectory.turns:
        if turn.role == "rubric_judge":
            continue
        prompt = tokenizer.decode(turn.prompt_ids)
        assert "120 dias" not in prompt
        assert not set(extract_citations(prompt)) & set(task.gold["citations"])
    assert reference and "120 dias" in reference

    debate.meta["question_id"] = task.id
    report = env.report([debate], [Group(debate, [trajectory])], ReportRequest("test", "s", None))
    row = report.data["systems"]["irac"]
    assert row["rubric"]["mean"] == pytest.approx(700 / 11)
    assert row["citation_f1"]["mean"] == pytest.approx(50.0)


def test_open_ended_needs_rubric_judges_and_refuses_adversarial():
    with pytest.raises(ConfigError, match="`env.rubric_judges` is empty"):
        load_env("debate", dataset="oab", source=str(OAB_FIXTURE))
    with pytest.raises(ConfigError, match="`env.reward_mode: adversarial` needs options"):
        load_env(
            "debate",
            dataset="oab",
            source=str(OAB_FIXTURE),
            reward_mode="adversarial",
            rubric_weight=0,
        )


BAREXAM_ROWS = [
    {
        "idx": 1,
        "prompt": "Facts one.",
        "question": "Q1?",
        "choice_a": "a",
        "choice_b": "b",
        "choice_c": "c",
        "choice_d": "d",
        "answer": "B",
        "subject": "Torts",
    },  # fmt: skip
    {
        "idx": 2,
        "prompt": "Facts one.",
        "question": "Q2?",
        "choice_a": "a",
        "choice_b": "b",
        "choice_c": "c",
        "choice_d": "d",
        "answer": "d",
        "subject": "Torts",
    },  # fmt: skip
    {
        "idx": 3,
        "prompt": "",
        "question": "Q3?",
        "choice_a": "a",
        "choice_b": "b",
        "choice_c": "c",
        "choice_d": "d",
        "answer": "A",
        "subject": "Evidence",
    },  # fmt: skip
    {
        "idx": 4,
        "prompt": "Facts two.",
        "question": "Q4?",
        "choice_a": "a",
        "choice_b": "b",
        "choice_c": "c",
        "choice_d": "d",
        "answer": "C",
        "subject": "Contracts",
    },  # fmt: skip
]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_barexam_schema_loads_and_splits_by_fact_pattern(tmp_path):
    source = _write_jsonl(tmp_path / "barexam.jsonl", BAREXAM_ROWS)
    for seed in range(6):
        env = DebateEnv(
            DebateEnvConfig(
                dataset="barexam", source=str(source), split_seed=seed, eval_fraction=0.25
            )
        )
        test = env.questions("test")
        sides = {t.id: side for side in ("train", "test") for t in env.questions(side)}
        assert sides["barexam-1"] == sides["barexam-2"]  # one fact pattern, one side
        assert len(sides) == 4 and test
    task = next(t for t in env.questions("train") + test if t.id == "barexam-2")
    assert task.gold == 3 and task.inputs["question"] == "Facts one.\n\nQ2?"
    assert task.inputs["choices"] == ["a", "b", "c", "d"]

    folder = tmp_path / "hub_layout"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", BAREXAM_ROWS[:3])
    _write_jsonl(folder / "test.jsonl", BAREXAM_ROWS[3:])
    env = DebateEnv(DebateEnvConfig(dataset="barexam", source=str(folder)))
    assert [t.id for t in env.questions("test")] == ["barexam-4"]


def test_malformed_rows_name_file_row_and_field(tmp_path):
    bad = dict(BAREXAM_ROWS[0], answer="E")
    source = _write_jsonl(tmp_path / "bad.jsonl", [BAREXAM_ROWS[1], bad])
    with pytest.raises(DatasetError, match=re.escape(f"{source} row 2: `answer` 'E'")):
        DebateEnv(DebateEnvConfig(dataset="barexam", source=str(source)))
    missing = {k: v for k, v in BAREXAM_ROWS[0].items() if k != "choice_c"}
    source = _write_jsonl(tmp_path / "missing.jsonl", [missing])
    with pytest.raises(DatasetError, match="row 1: missing field `choice_c`"):
        DebateEnv(DebateEnvConfig(dataset="barexam", source=str(source)))
    oab = tmp_path / "oab.jsonl"
    oab.write_text(json.dumps({"question_id": "x", "statement": "S?", "ground_truth": {}}) + "\n")
    with pytest.raises(DatasetError, match="row 1 ground_truth: missing field `reference_answer`"):
        DebateEnv(DebateEnvConfig(dataset="oab", source=str(oab), rubric_weight=0))
