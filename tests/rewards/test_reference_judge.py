"""The built-in stand-in judge (`builtin:reference-overlap`): its token F1 by hand, and LEXam open
episodes judged by it through the real judge client, parser and cache."""

import asyncio

import pytest
from transformers import AutoTokenizer

from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.policy import ScriptedPolicy
from lexrl.rewards.judge import JudgeClient, JudgeConfig, parse_bracket_score
from lexrl.rewards.reference_judge import BUILTIN_URL, judge_reply, token_f1


def test_token_f1_by_hand():
    # 4 common tokens; precision 4/4, recall 4/6: F1 = 2 * 1 * (2/3) / (5/3) = 0.8.
    assert token_f1("The contract is void", "the contract is valid and void") == pytest.approx(0.8)
    # Any script, case folded (ß is ss): 3 common of 5 answer and 3 reference tokens: 1.2 / 1.6.
    assert token_f1("Schadenersatz gemäß Art. 97 OR", "GEMÄSS art 97") == pytest.approx(0.75)
    # A token counts as often as it occurs on both sides, not as often as the answer repeats it.
    assert token_f1("art art art art", "art 97") == pytest.approx(2 * 0.25 * 0.5 / 0.75)
    assert token_f1("", "art 97") == token_f1("...", "art 97") == 0.0


def test_a_prompt_without_the_lexam_blocks_gets_no_score():
    reply = judge_reply([{"role": "user", "content": "Grade this: Art. 41 OR."}])
    with pytest.raises(ValueError, match="no \\[\\[x.x\\]\\] score"):
        parse_bracket_score(reply)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


def judged(env: LexamEnv, tokenizer, episodes):
    """LEXam open episodes `(task, examinee answer)` played on one event loop."""

    async def play():
        trajectories = []
        for task, answer in episodes:
            policy = ScriptedPolicy(
                tokenizer, task.id, lambda role, _, a=answer: {"examinee": a}[role]
            )
            trajectories.append(await env.run_episode(task, policy))
        await env.judge_client.aclose()
        return trajectories

    return asyncio.run(play())


def builtin_env(cache_dir) -> LexamEnv:
    judge = JudgeConfig(BUILTIN_URL, "reference-overlap")
    return LexamEnv(
        LexamEnvConfig(config="open_question", judges=[judge], judge_cache_dir=str(cache_dir))
    )


def test_lexam_open_episodes_are_scored_by_token_f1_through_the_judge_client(tokenizer, tmp_path):
    env = builtin_env(tmp_path / "cache")
    first, second = env.tasks("test")[:2]
    answers = [first.gold, "I do not know.", second.gold, first.gold]
    episodes = list(zip([first, first, second, second], answers, strict=True))
    trajectories = judged(env, tokenizer, episodes)

    for trajectory, (task, answer) in zip(trajectories, episodes, strict=True):
        assert trajectory.failed is None
        assert trajectory.reward == pytest.approx(round(token_f1(answer, task.gold), 2))
        (judge_turn,) = [turn for turn in trajectory.turns if turn.role == "judge"]
        assert not judge_turn.trainable and "[[" in judge_turn.text
    assert trajectories[0].reward == 1.0 and trajectories[1].reward < 0.2
    # The other question's reference answer scores as the overlap of two different answers.
    assert trajectories[3].reward < 1.0
    assert env.judge_client.stats() == {
        "requests": 4,
        "cache_hits": 0,
        "parse_retries": 0,
        "failures": 0,
    }

    again = builtin_env(tmp_path / "cache")
    replayed = judged(again, tokenizer, episodes)
    assert [t.reward for t in replayed] == [t.reward for t in trajectories]
    assert again.judge_client.stats()["cache_hits"] == 4


def test_a_builtin_judge_needs_no_api_key(monkeypatch):
    monkeypatch.delenv("JUDGE_KEY", raising=False)
    client = JudgeClient([JudgeConfig(BUILTIN_URL, "reference-overlap", "JUDGE_KEY")], None)
    result = asyncio.run(
        client.score([{"role": "user", "content": "no blocks"}], parse_bracket_score)
    )
    assert result.failed and result.score is None
    assert result.calls[0].error.startswith(f"{BUILTIN_URL}: unparsable after 3 replies")
