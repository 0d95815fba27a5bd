"""The MASLegalBench authors' answer rule (`parse_official`, their `parse_string.py` and
`eval.py`) on hand-made replies, and the report's official column built from it beside ours."""

import pytest

from lexrl.envs.gdpr.parsing import OfficialAnswer, parse_official, parse_reply
from lexrl.envs.gdpr.report import episode_record, final_reply, markdown_table, system_metrics
from lexrl.types import Trajectory, Turn

DROPPED = OfficialAnswer(False)

# (reply, what their parser gives), each worked out by hand from their three steps:
# 1. json.loads(reply)["answer"], any failure falls through; 2. the first non-greedy {...},
# json.loads(...)["answer"], a failure drops the reply; 3. only without any {...}: a json fence.
CASES = [
    # step 1: the whole reply is one JSON object
    ('{"rationale": "r", "answer": "Yes"}', OfficialAnswer(True, "Yes")),
    ('  {"answer": "B"}  \n', OfficialAnswer(True, "B")),
    (
        '{\n  "rationale": "The controller failed.",\n  "answer": "No"\n}',
        OfficialAnswer(True, "No"),
    ),
    # a brace inside a string is harmless while the whole reply is JSON
    ('{"rationale": "see {x}", "answer": "A"}', OfficialAnswer(True, "A")),
    # the last duplicate key wins in json.loads
    ('{"answer": "Yes", "answer": "No"}', OfficialAnswer(True, "No")),
    # the raw value, never normalised: parsed, and wrong against "B" / "Yes"
    ('{"rationale": "r", "answer": "B."}', OfficialAnswer(True, "B.")),
    ('{"rationale": "r", "answer": "yes"}', OfficialAnswer(True, "yes")),
    ('{"rationale": "r", "answer": "Option B"}', OfficialAnswer(True, "Option B")),
    ('{"answer": null}', OfficialAnswer(True, None)),
    ('{"answer": 2}', OfficialAnswer(True, 2)),
    # step 2: the first {...}
    ('Here is my answer: {"rationale": "r", "answer": "No"}', OfficialAnswer(True, "No")),
    ('```json\n{"rationale": "r", "answer": "C"}\n```', OfficialAnswer(True, "C")),
    ('<think>Let me think.</think>\n{"rationale": "r", "answer": "D"}', OfficialAnswer(True, "D")),
    ('[{"answer": "A"}]', OfficialAnswer(True, "A")),  # a list has no ["answer"]: step 2
    ('{"rationale": "a, b", "answer": "No"} and more words', OfficialAnswer(True, "No")),
    # step 2 fails: dropped, never falls back to later objects or the fence
    ('Answer: {"rationale": "see {x}", "answer": "A"}', DROPPED),  # cut at the first }
    ('{"outer": {"answer": "B"}}', DROPPED),  # no top-level answer, then a cut object
    ('{"rationale": "r"} {"answer": "Yes"}', DROPPED),  # the first object has no answer
    ('{"Answer": "Yes"}', DROPPED),  # the key is case-sensitive
    ('<think>Maybe {A}?</think>{"answer": "A"}', DROPPED),  # thinking is not removed
    ("{'answer': 'Yes'}", DROPPED),  # a Python dict is no JSON
    ('```json\n{"answer": "Yes",}\n```', DROPPED),  # trailing comma
    ('Sure! {"rationale": "r", "answer": {"label": "B"}}', DROPPED),
    # no {...} at all
    ("The answer is B.", DROPPED),
    ("", DROPPED),
    ('"Yes"', DROPPED),
    ('{"rationale": "r", "answer": "No"', DROPPED),  # unclosed: no {...}
    ('```json\n"answer": "Yes"\n```', DROPPED),  # a fence, but no object in it
]


@pytest.mark.parametrize(("reply", "expected"), CASES)
def test_the_authors_rule_on_hand_made_replies(reply, expected):
    assert parse_official(reply) == expected


def test_there_are_at_least_twenty_cases_of_both_outcomes():
    assert len(CASES) >= 20
    assert sum(e.parsed for _, e in CASES) >= 10 and sum(not e.parsed for _, e in CASES) >= 10


@pytest.mark.parametrize(
    ("reply", "kind", "ours"),
    [
        # where our lenient parser and theirs part: ours reads an answer they drop...
        ('{"rationale": "r"} {"answer": "Yes"}', "yes_no", "Yes"),
        ("The answer is B.", "abcd", "B"),
        ('<think>Maybe {A}?</think>{"answer": "A"}', "abcd", "A"),
        ('{"Answer": "Yes"}', "yes_no", "Yes"),
        # ... or normalises a value they compare raw
        ('{"rationale": "r", "answer": "B."}', "abcd", "B"),
        ('{"rationale": "r", "answer": "yes"}', "yes_no", "Yes"),
    ],
)
def test_where_the_lenient_parser_differs(reply, kind, ours):
    assert parse_reply(reply, kind).answer == ours
    official = parse_official(reply)
    assert not official.parsed or official.decision != ours


def trajectory(*replies, accuracy=0.0, parsed=0.0, roles=None):
    roles = roles or ["meta"] * len(replies)
    turns = [Turn(role, [], [], [], text, 0) for role, text in zip(roles, replies, strict=True)]
    return Trajectory("t", turns=turns, metrics={"accuracy": accuracy, "parsed": parsed})


def test_the_final_reply_is_the_last_meta_turn():
    live = trajectory("F: facts", "the facts", '{"answer": "No"}', roles=["meta", "facts", "meta"])
    assert final_reply(live) == '{"answer": "No"}'
    assert final_reply(trajectory("x", roles=["facts"])) is None
    record = episode_record(trajectory("x", roles=["facts"]), "Yes")
    assert record["official_parsed"] == 0.0 and record["official_correct"] == 0.0


def test_episode_records_and_both_parsed_only_columns():
    # gold "B" for every episode; (reply, our accuracy, our parsed)
    episodes = [
        ('{"rationale": "r", "answer": "B"}', 1.0, 1.0),  # both right
        ('{"rationale": "r", "answer": "B."}', 1.0, 1.0),  # ours right, theirs parsed, wrong
        ("The answer is B.", 1.0, 1.0),  # ours right, theirs dropped
        ('{"rationale": "r", "answer": "C"}', 0.0, 1.0),  # both wrong
        ("no idea", 0.0, 0.0),  # both dropped
    ]
    records = [
        episode_record(trajectory(text, accuracy=a, parsed=p), "B") for text, a, p in episodes
    ]
    assert [r["official_parsed"] for r in records] == [1.0, 1.0, 0.0, 1.0, 0.0]
    assert [r["official_correct"] for r in records] == [1.0, 0.0, 0.0, 0.0, 0.0]
    row = system_metrics(records, resamples=200)
    assert row["accuracy"]["mean"] == pytest.approx(60.0)  # 3 of 5
    assert row["accuracy_lenient_parsed_only"]["mean"] == pytest.approx(75.0)  # 3 of 4
    assert row["accuracy_official"]["mean"] == pytest.approx(100 / 3)  # 1 of 3
    assert row["parse_rate"] == pytest.approx(80.0)
    assert row["official_parse_rate"] == pytest.approx(60.0)
    text = markdown_table({"none": row}, {"random": 42.0, "prior": 64.0}, 5, "scripted")
    assert "parsed only (lenient parser)" in text and "parsed only (official rule)" in text
    assert "| 80.0 / 60.0 |" in text


def test_records_without_the_authors_fields_leave_the_official_column_empty():
    row = system_metrics([{"correct": 1.0, "parsed": 1.0}], resamples=50)
    assert row["accuracy_official"] is None and row["official_parse_rate"] is None
    text = markdown_table({"none": row}, {"random": 42.0, "prior": 64.0}, 1, "scripted")
    assert "| 100.0 / - |" in text
    # nothing parsed by their rule: no mean to give
    dropped = episode_record(trajectory("no idea"), "Yes")
    assert system_metrics([dropped], resamples=50)["accuracy_official"] is None
