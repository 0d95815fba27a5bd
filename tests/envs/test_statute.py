import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexrl.envs.statute.env import StatuteEnv
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.envs.statute.parsing import (
    PLANNER_ACTIONS,
    parse_diagnosis,
    parse_json_object,
    parse_planner_action,
    parse_rewrite,
)
from lexrl.envs.statute.pool import CandidatePool
from lexrl.errors import DatasetError
from lexrl.policy import Policy, ScriptedPolicy
from lexrl.rollout.hf_backend import HFBackend
from lexrl.types import Task

json_like = st.one_of(
    st.text(),
    st.builds(lambda a, b: f'{{"action": {a!r}, "reason": {b!r}}}', st.text(), st.text()),
    st.builds(lambda q: '{"queries": ' + q + "}", st.text()),
    st.just('{"query": ["a", 3, null, ""]}'),
    st.just("{" * 5000),
)


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_parsers_never_raise(text):
    action = parse_planner_action(text)
    assert (action.action is None) == (action.error is not None)
    assert action.action is None or action.action in PLANNER_ACTIONS
    rewrite = parse_rewrite(text)
    assert rewrite.error is not None or rewrite.queries
    assert all(isinstance(q, str) and q.strip() for q in rewrite.queries)
    parse_diagnosis(text)
    parse_json_object(text)


def test_parsers_read_wrapped_json():
    assert (
        parse_planner_action('Sure! ```json\n{"action": "exit", "reason": "done"}\n```').action
        == "exit"
    )
    assert parse_rewrite('{"queries": ["a b", " ", "c"]}').queries == ["a b", "c"]
    assert parse_rewrite('{"query": ""}').error == "empty rewrite"
    assert parse_planner_action('{"action": "delete_corpus"}').error.startswith("unknown action")


def test_pool_merges_dedups_and_orders_by_reciprocal_rank():
    pool = CandidatePool()
    pool.add([5, 6, 7])
    pool.add([6, 9])
    assert pool.ordered() == [6, 5, 9, 7]
    assert len(pool) == 4


def test_scripted_episode_reward_matches_eq_1_to_4(statute_env, tiny_model):
    _, tokenizer = tiny_model
    task = next(t for t in statute_env.tasks("train") if t.meta["type"] == "multi")
    # A teacher that always decomposes, then exits: one retrieval call per concept.
    teacher_calls = []

    def teacher(role, messages):
        teacher_calls.append(role)
        if role == "planner":
            return '{"action": "exit"}' if len(teacher_calls) > 1 else '{"action": "multi_element"}'
        return '{"queries": ' + str(task.meta["plan"]["concepts"]).replace("'", '"') + "}"

    trajectory = asyncio.run(
        statute_env.run_episode(task, ScriptedPolicy(tokenizer, task.id, teacher))
    )
    assert trajectory.metrics["retrieval_calls"] == 2
    assert trajectory.components["recall"] == 1.0
    assert trajectory.components["coverage_gain"] == pytest.approx(0.1 * 1.0)
    assert trajectory.components["step_penalty"] == pytest.approx(-0.05 * 2)
    assert trajectory.components["early_exit"] == 0.0
    assert trajectory.reward == pytest.approx(1.0 + 0.1 - 0.1)
    assert [turn.role for turn in trajectory.turns] == ["planner", "multi_element", "planner"]


def test_exit_before_any_retrieval_costs_five(statute_env, tiny_model):
    _, tokenizer = tiny_model
    task = statute_env.tasks("train")[0]
    policy = ScriptedPolicy(tokenizer, task.id, lambda role, messages: '{"action": "exit"}')
    trajectory = asyncio.run(statute_env.run_episode(task, policy))
    assert trajectory.components["early_exit"] == -5.0
    assert trajectory.components["recall"] == 0.0


def test_invalid_actions_use_up_steps_without_the_exit_penalty(statute_env, tiny_model):
    _, tokenizer = tiny_model
    task = statute_env.tasks("train")[0]
    policy = ScriptedPolicy(tokenizer, task.id, lambda role, messages: "I think we should search.")
    trajectory = asyncio.run(statute_env.run_episode(task, policy))
    assert trajectory.metrics["invalid_actions"] == statute_env.config.max_iterations
    assert trajectory.components["early_exit"] == 0.0
    assert trajectory.components["step_penalty"] == pytest.approx(
        -0.05 * (statute_env.config.max_iterations + 1)
    )


def test_gold_never_appears_in_any_prompt(statute_env, tiny_model):
    model, tokenizer = tiny_model
    sentinel = "GOLD-SENTINEL-4711"
    tasks = [
        Task(id=t.id, inputs=t.inputs, gold=[*t.gold, sentinel], meta=t.meta)
        for t in statute_env.tasks("test")[:6]
    ]
    rng = random.Random(0)
    backend = HFBackend(model, tokenizer)

    async def play():
        runs = [
            statute_env.run_episode(t, ScriptedPolicy(tokenizer, t.id, statute_env.teacher(t, rng)))
            for t in tasks
        ]
        runs += [
            statute_env.run_episode(t, Policy(backend, tokenizer, t.id, max_new_tokens=16))
            for t in tasks
        ]
        return await asyncio.gather(*runs)

    trajectories = asyncio.run(play())
    prompts = [
        tokenizer.decode(turn.prompt_ids)
        for trajectory in trajectories
        for turn in trajectory.turns
    ]
    assert prompts
    assert not any(sentinel in prompt for prompt in prompts)
    for task, trajectory in zip(tasks * 2, trajectories, strict=True):
        first_prompt = tokenizer.decode(trajectory.turns[0].prompt_ids)
        for article_id in task.gold[:-1]:
            article = statute_env.corpus[statute_env.id_to_index[article_id]]
            assert article["content"] not in first_prompt
            assert article["name"] not in first_prompt


def test_jsonl_dataset_errors_name_file_and_line(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"id": 1, "name": "A", "content": "security deposit"}\n{"id": 2, "name": "B"}\n'
    )
    config = StatuteEnvConfig(
        dataset="jsonl", corpus_path=str(corpus), queries_path=str(tmp_path / "{split}.jsonl")
    )
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: missing key\(s\) content"):
        StatuteEnv.from_config(config)
    corpus.write_text('{"id": 1, "name": "A", "content": "security deposit"}\n')
    (tmp_path / "train.jsonl").write_text(
        '{"id": "a", "query": "q", "gold": [1]}\n\n{"id": "b", "query": "q", gold: [1]}\n'
    )
    with pytest.raises(DatasetError, match=r"train\.jsonl:3: not valid JSON"):
        StatuteEnv.from_config(config)
    (tmp_path / "train.jsonl").write_text('{"id": "a", "query": "q", "gold": [9]}\n')
    with pytest.raises(DatasetError, match=r"train\.jsonl:1: gold id\(s\) \[9\] not in"):
        StatuteEnv.from_config(config)


def test_bytes_that_are_not_utf8_name_the_file_and_line(tmp_path):
    from lexrl.envs.statute.data import load_csaid, load_jsonl, load_stard, load_stopwords

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": 1, "name": "A", "content": "deposit"}\n')
    # Past the reader's 8 KiB buffer, whose offsets are not the file's.
    lines = [f'{{"id": "q{n}", "query": "q", "gold": [1]}}' for n in range(400)]
    lines.insert(300, '{"id": "bad", "query": "caf\xe9", "gold": [1]}')
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_bytes("\n".join(lines).encode("latin-1"))
    with pytest.raises(DatasetError) as error:
        load_jsonl(corpus, str(tmp_path / "{split}.jsonl"))
    assert str(error.value) == (
        f"{tmp_path / 'train.jsonl'}:301: not UTF-8 (byte 0xe9 at column 28); save the file as "
        "UTF-8"
    )
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'[\n{"query": "\xff"}]')
    for load in (
        lambda: load_stard(bad, None),
        lambda: load_csaid(bad),
        lambda: load_stopwords(bad),
        lambda: load_jsonl(bad, str(tmp_path / "{split}.jsonl")),
    ):
        with pytest.raises(DatasetError, match=rf"^{bad}:2: not UTF-8 \(byte 0xff at column 12\)"):
            load()


def test_jsonl_dataset_refuses_values_of_the_wrong_type(tmp_path):
    from lexrl.envs.statute.data import load_jsonl

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": 1, "name": "A", "content": "deposit"}\n')
    queries = str(tmp_path / "{split}.jsonl")
    for line, said in (
        ('{"id": "a", "query": "q", "gold": 1}', "`gold` must be a list of ids, not 1"),
        ('{"id": "a", "query": "q", "gold": [[1]]}', "`gold` must be a string or an integer"),
        ('{"id": "a", "query": 5, "gold": [1]}', "`query` is not a string: 5"),
        ('{"id": true, "query": "q", "gold": [1]}', "`id` must be a string or an integer"),
        ('{"id": 1, "query": "q", "gold": []}\n{"id": "1", "query": "q", "gold": []}', "id '1'"),
    ):
        for split in ("train", "test"):
            (tmp_path / f"{split}.jsonl").write_text(line + "\n")
        with pytest.raises(DatasetError, match=r"train\.jsonl:\d: ") as error:
            load_jsonl(corpus, queries)
        assert said in str(error.value)


def test_jsonl_dataset_loads(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"id": 1, "name": "A", "content": "security deposit refund"}\n{"id": 2, "name": "B", "content": "rent"}\n'
    )
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_text(
            '{"id": "a", "query": "deposit back?", "gold": [1]}\n'
        )
    env = StatuteEnv.from_config(
        StatuteEnvConfig(
            dataset="jsonl", corpus_path=str(corpus), queries_path=str(tmp_path / "{split}.jsonl")
        )
    )
    assert [t.gold for t in env.tasks("test")] == [[1]]
    assert [doc for doc, _ in env.retrieve("security deposit")] == [1]


def test_chinese_prompts_load():
    from lexrl.envs.statute.env import ROLES, load_prompts

    prompts = load_prompts("zh")
    assert set(prompts) == set(ROLES)
    assert "JSON" in prompts["planner"] and "规划" in prompts["planner"]


def test_dense_first_stage_and_reranker_feed_the_pool(tmp_path, tiny_model):
    from lexrl.retrieval.options import RetrievalConfig

    _, tokenizer = tiny_model
    config = StatuteEnvConfig(
        first_stage_k=6,
        final_k=2,
        retrieval=RetrievalConfig(
            first_stage="dense",
            dense_model="tiny",
            reranker_model="tiny",
            index_dir=str(tmp_path / "index"),
            device="cpu",
        ),
    )
    env = StatuteEnv.from_config(config)
    hits = env.retrieve("security deposit refund")
    reranker = env.retriever.retriever.reranker
    dense_top = env.retriever.retriever.first_stage.search("security deposit refund", 6)
    scores = reranker.score(
        "security deposit refund", [env.documents[h.doc_index] for h in dense_top]
    )
    best = sorted(zip(scores, dense_top, strict=True), key=lambda pair: -pair[0])[:2]
    assert hits == [(env.corpus[h.doc_index]["id"], pytest.approx(s)) for s, h in best]

    task = env.tasks("test")[0]
    teacher = env.teacher(task, random.Random(1))
    trajectory = asyncio.run(env.run_episode(task, ScriptedPolicy(tokenizer, task.id, teacher)))
    outcome = trajectory.outcome
    assert len(outcome["scores"]) == len(outcome["pool"]) > 0
    assert all(isinstance(score, float) for score in outcome["scores"])
