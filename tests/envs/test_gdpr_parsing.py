"""Reading a MASLegalBench answer, on hand-written and arbitrary replies."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.envs.gdpr.parsing import LABELS, normalise_answer, parse_reply


@pytest.mark.parametrize(
    ("text", "kind", "label"),
    [
        ("B", "abcd", "B"),
        ("B.", "abcd", "B"),
        ("Option B", "abcd", "B"),
        ("(b)", "abcd", "B"),
        ("answer: B", "abcd", "B"),
        ("The answer is **B**", "abcd", "B"),
        ("[D]", "abcd", "D"),
        ("###C###", "abcd", "C"),
        ("'A'", "abcd", "A"),
        ("B. Only the nature, scope and context of processing", "abcd", "B"),
        ("C) Only the risk", "abcd", "C"),
        ("yes", "yes_no", "Yes"),
        ("YES.", "yes_no", "Yes"),
        ("No,", "yes_no", "No"),
        ("No, the controller remains fully responsible", "yes_no", "No"),
        ("Final answer: no", "yes_no", "No"),
        # None: another kind, several options, prose, refusals.
        ("Yes", "abcd", None),
        ("A", "yes_no", None),
        ("B, C", "abcd", None),
        ("A or B", "abcd", None),
        ("A company must", "abcd", None),
        ("Definitely B", "abcd", None),
        ("E", "abcd", None),
        ("Yes the data was lost", "yes_no", None),
        ("Nothing", "yes_no", None),
        ("insufficient context", "yes_no", None),
        ("", "abcd", None),
    ],
)
def test_normalise_answer(text, kind, label):
    assert normalise_answer(text, kind) == label


def test_an_unknown_kind_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown question kind"):
        normalise_answer("B", "mcq")
    with pytest.raises(ValueError, match="unknown question kind"):
        parse_reply("B", "mcq")


@pytest.mark.parametrize(
    ("text", "kind", "answer", "rationale"),
    [
        ('{"rationale": "Art. 32 applies.", "answer": "B"}', "abcd", "B", "Art. 32 applies."),
        ('```json\n{"rationale": "r", "answer": "No"}\n```', "yes_no", "No", "r"),
        ('Here it is:\n{"rationale": "r", "answer": "(c)"} Done.', "abcd", "C", "r"),
        ('<think>maybe {"answer": "A"}</think>{"rationale": "r", "answer": "D"}', "abcd", "D", "r"),
        (
            '{"rationale": "first", "answer": "A"} then {"rationale": "second", "answer": "C"}',
            "abcd",
            "C",
            "second",
        ),  # fmt: skip
        ('{"Rationale": "r", "Answer": "yes"}', "yes_no", "Yes", "r"),
        ('{"answer": "Yes"}', "yes_no", "Yes", ""),
        (
            '{"rationale": ["step 1", "step 2"], "answer": "No"}',
            "yes_no",
            "No",
            '["step 1", "step 2"]',
        ),
        (
            '{"rationale": {"nested": {"x": 1}}, "answer": "B."}',
            "abcd",
            "B",
            '{"nested": {"x": 1}}',
        ),
    ],
)
def test_json_replies(text, kind, answer, rationale):
    parsed = parse_reply(text, kind)
    assert (parsed.answer, parsed.rationale, parsed.error) == (answer, rationale, None)


def test_a_broken_object_still_gives_its_answer_field():
    text = '{"rationale": "the "appropriate" measures were missing", "answer": "Yes"}'
    parsed = parse_reply(text, "yes_no")
    assert (parsed.answer, parsed.error) == ("Yes", None)
    assert parsed.rationale == text


@pytest.mark.parametrize(
    ("text", "kind", "answer"),
    [
        ("Article 32 was breached.\nAnswer: B", "abcd", "B"),
        ("The answer is (C).", "abcd", "C"),
        ("**Final answer:** Yes", "yes_no", "Yes"),
        ("Answer: A at first, but on reflection the answer is D", "abcd", "D"),
        ("<think>Answer: No</think>Answer: Yes", "yes_no", "Yes"),
        ("No\n\nThe answer is no.", "yes_no", "No"),
        ("Yes.", "yes_no", "Yes"),
        (" **no** ", "yes_no", "No"),
        ("(B)", "abcd", "B"),
        ("C.", "abcd", "C"),
    ],
)
def test_a_stated_answer_without_json(text, kind, answer):
    parsed = parse_reply(text, kind)
    assert (parsed.answer, parsed.error) == (answer, None)
    assert parsed.rationale == text.rpartition("</think>")[2].strip()


@pytest.mark.parametrize(
    ("text", "kind", "error"),
    [
        ('{"rationale": "r", "answer": "insufficient context"}', "yes_no", "is not one of Yes, No"),
        ('{"rationale": "r", "answer": "E"}', "abcd", "is not one of A, B, C, D"),
        ('{"rationale": "r", "answer": 2}', "abcd", "`answer` is not a string"),
        ('{"rationale": "r", "answer": null}', "abcd", "`answer` is not a string"),
        ("The answer is a breach of Article 32.", "abcd", "no JSON object"),
        ("I cannot tell from the context.", "yes_no", "no JSON object"),
        ("<think>Answer: B, surely", "abcd", "no JSON object"),  # cut off while thinking
        ("", "yes_no", "no JSON object"),
        ("Yes. No", "yes_no", "no bare label"),
        ("Yes, no.", "yes_no", "no bare label"),
        ("A. Articles 5 and 6\nB. Articles 15 and 17", "abcd", "no bare label"),
        ("c", "abcd", "no bare label"),  # a lower-case letter is a word, not an option
        ("Yes", "abcd", "no bare label"),
    ],
)
def test_replies_without_an_answer_say_why(text, kind, error):
    parsed = parse_reply(text, kind)
    assert parsed.answer is None
    assert error in parsed.error


_FRAGMENTS = st.sampled_from(
    ['{"answer": "', '"rationale": ', "}", "{", "```json", "```", "<think>", "</think>",
     "Answer: ", "B", "Yes", "no", "(", ")", '"', "\\", ",", "\n", "[", "]", "null", "1e999"]
)  # fmt: skip


@given(st.text(), st.sampled_from(list(LABELS)))
def test_arbitrary_text_never_raises(text, kind):
    parsed = parse_reply(text, kind)
    assert parsed.answer in (None, *LABELS[kind])
    assert (parsed.answer is None) == (parsed.error is not None)
    assert isinstance(parsed.rationale, str)
    assert normalise_answer(text, kind) in (None, *LABELS[kind])


@given(
    st.lists(st.one_of(_FRAGMENTS, st.text(max_size=5)), max_size=30), st.sampled_from(list(LABELS))
)
def test_json_like_text_never_raises(parts, kind):
    parsed = parse_reply("".join(parts), kind)
    assert parsed.answer in (None, *LABELS[kind])
    assert (parsed.answer is None) == (parsed.error is not None)


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=10,
    ),
    st.sampled_from(list(LABELS)),
)
def test_any_json_answer_value_never_raises(value, kind):
    parsed = parse_reply(json.dumps({"rationale": value, "answer": value}), kind)
    assert parsed.answer in (None, *LABELS[kind])
    assert isinstance(parsed.rationale, str)


def test_subtask_lines_are_read_and_the_rest_counted_invalid():
    from lexrl.envs.gdpr.parsing import parse_subtasks

    agents = ("F", "LR", "AR", "CS")
    plan = parse_subtasks(
        "1. F: What happened?\n- **LR**: Which article?\nhello\ncs - guess\nAR: x\nF: y", agents, 4
    )
    assert plan.subtasks == [
        ("F", "What happened?"),
        ("LR", "Which article?"),
        ("CS", "guess"),
        ("AR", "x"),
    ]
    assert plan.invalid == 2  # "hello", and "F: y" past the limit
    assert parse_subtasks("", agents, 4) == parse_subtasks("<think>F: a</think>", agents, 4)


@given(st.text(), st.integers(min_value=1, max_value=6))
def test_subtask_parsing_never_raises(text, limit):
    from lexrl.envs.gdpr.parsing import parse_subtasks

    plan = parse_subtasks(text, ("F", "LR", "AR", "CS"), limit)
    assert len(plan.subtasks) <= limit and plan.invalid >= 0
