from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexrl.envs.debate.rubric import (
    MAX_TOTAL,
    RUBRIC,
    RUBRIC_FORMAT,
    RubricScore,
    parse_rubric,
    rubric_messages,
)
from lexrl.rewards.judge import JudgeParseError


def test_rubric_is_the_seeds():
    assert [(c.name, c.maximum) for c in RUBRIC] == [
        ("correctness", 4),
        ("reasoning", 3),
        ("citations", 4),
    ]
    assert MAX_TOTAL == 11
    assert all(len(c.levels) == c.maximum + 1 for c in RUBRIC)


def test_tags():
    reply = (
        "The answer identifies the right remedy but omits the deadline.\n"
        "<correctness>3</correctness>\n<reasoning>2</reasoning>\n<citations>4</citations>"
    )
    score = parse_rubric(reply)
    assert score == RubricScore(correctness=3, reasoning=2, citations=4)
    assert score.total == 9
    assert score.score == pytest.approx(9 / 11)


def test_lines_with_markdown():
    reply = "Justification...\nCorrectness: 4\n**Reasoning (0-3):** 3/3\n- Citations = 0 out of 4\n"
    assert parse_rubric(reply) == RubricScore(4, 3, 0)


def test_tags_and_lines_mixed_and_spaced():
    reply = "< Correctness > 1 </ Correctness >\nREASONING: 0\n<citations>\n2\n</citations>"
    assert parse_rubric(reply) == RubricScore(1, 0, 2)


def test_extremes_score_zero_and_one():
    assert parse_rubric("Correctness: 0\nReasoning: 0\nCitations: 0").score == 0.0
    assert parse_rubric("Correctness: 4\nReasoning: 3\nCitations: 4").score == 1.0


def test_last_occurrence_wins_across_formats():
    reply = (
        "Correctness: 1\nReasoning: 1\nCitations: 1\n"
        "On reflection:\n<correctness>3</correctness><reasoning>2</reasoning>\n"
        "Citations: 4"
    )
    assert parse_rubric(reply) == RubricScore(3, 2, 4)


def test_thinking_is_stripped():
    reply = (
        "<think><correctness>0</correctness><reasoning>0</reasoning>"
        "<citations>0</citations></think>"
        "<correctness>2</correctness><reasoning>1</reasoning><citations>3</citations>"
    )
    assert parse_rubric(reply) == RubricScore(2, 1, 3)
    with pytest.raises(JudgeParseError, match="correctness, reasoning, citations"):
        parse_rubric("<think>Correctness: 3\nReasoning: 2\nCitations: 4</think>Looks fine.")


def test_prose_mentioning_a_criterion_is_no_score():
    reply = "Citations: the answer cites the wrong article.\nCorrectness: 2\nReasoning: 1"
    with pytest.raises(JudgeParseError, match="no score for citations"):
        parse_rubric(reply)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("<correctness>5</correctness><reasoning>2</reasoning><citations>2</citations>", "correctness is 5, outside 0-4"),
        ("<correctness>2</correctness><reasoning>4</reasoning><citations>2</citations>", "reasoning is 4, outside 0-3"),
        ("Correctness: 2\nReasoning: 2\nCitations: -1", "citations is -1, outside 0-4"),
        ("Correctness: 2.5\nReasoning: 2\nCitations: 1", "correctness must be a whole number from 0 to 4, not 2.5"),
        ("Correctness: 2\nReasoning: 3/4\nCitations: 1", "reasoning is scored out of 3, not 4"),
        ("Correctness: 2\nReasoning: 2", "no score for citations"),
        ("<correctness>3</correctness>", "no score for reasoning, citations"),
        ("", "no score for correctness, reasoning, citations"),
    ],
)  # fmt: skip
def test_invalid_replies_name_the_criterion(reply, message):
    with pytest.raises(JudgeParseError, match=message):
        parse_rubric(reply)


def test_an_early_invalid_score_is_overridden_by_a_later_valid_one():
    reply = "Correctness: 7\nReasoning: 2\nCitations: 1\nCorrected: <correctness>3</correctness>"
    assert parse_rubric(reply) == RubricScore(3, 2, 1)


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_arbitrary_text_scores_in_unit_interval_or_raises_parse_error(text):
    try:
        score = parse_rubric(text).score
    except JudgeParseError:
        return
    assert 0.0 <= score <= 1.0


REPLY_PIECES = st.sampled_from(
    ["<correctness>", "</correctness>", "<reasoning>", "</reasoning>", "<citations>",
     "</citations>", "Correctness:", "Reasoning:", "Citations:", "\n", " ", "0", "3", "4", "9",
     "-", ".", "/", "out of", "**", "<think>", "</think>", "(0-4)"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(REPLY_PIECES, max_size=30).map("".join))
def test_reply_like_text_scores_in_unit_interval_or_raises_parse_error(text):
    try:
        score = parse_rubric(text).score
    except JudgeParseError:
        return
    assert 0.0 <= score <= 1.0


def test_format_hint_reply_parses():
    example = "<correctness>4</correctness> <reasoning>3</reasoning> <citations>4</citations>"
    assert "<correctness>0-4</correctness>" in RUBRIC_FORMAT
    assert parse_rubric(example).score == 1.0


def test_messages_carry_question_reference_and_answer():
    messages = rubric_messages(
        "Cabe mandado de segurança? {não é placeholder}",
        "Sim, art. 5º, LXIX, da CF/88.",
        "Cabe, nos termos da Lei 12.016/2009.",
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "<question>\nCabe mandado de segurança? {não é placeholder}\n</question>" in user
    assert "<reference_answer>\nSim, art. 5º, LXIX, da CF/88.\n</reference_answer>" in user
    assert "<candidate_answer>\nCabe, nos termos da Lei 12.016/2009.\n</candidate_answer>" in user
    assert user.index("<question>") < user.index("<reference_answer>")
    assert user.index("<reference_answer>") < user.index("<candidate_answer>")
    assert user.index("<candidate_answer>") < user.index("<evaluation_criteria>")


def test_prompt_files_format_and_state_every_level():
    prompts = resources.files("lexrl.envs.debate") / "prompts"
    user = (prompts / "rubric_judge_user.txt").read_text(encoding="utf-8")
    system = (prompts / "rubric_judge_system.txt").read_text(encoding="utf-8")
    filled = user.format(question="Q", reference="R", answer="A")
    assert "{" not in filled and "}" not in filled
    assert "{" not in system and "}" not in system
    for criterion in RUBRIC:
        assert f"{criterion.name.upper()} (0-{criterion.maximum} points)" in filled
        for level, meaning in enumerate(criterion.levels):
            assert f"{level} = {meaning}\n" in filled
        # The reply format the prompt asks for is the one parsed.
        assert f"<{criterion.name}>N</{criterion.name}>" in filled
        assert f"<{criterion.name}>N</{criterion.name}>" in system
