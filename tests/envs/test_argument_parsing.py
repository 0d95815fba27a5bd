import json

from hypothesis import given
from hypothesis import strategies as st

from lexrl.envs.argument.parsing import (
    ParsedPly,
    last_json_object,
    parse_ply,
    parse_review,
    parse_three_plies,
    parse_verdict,
)

EMPTY = {"c1": (), "c2": (), "c3": ()}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["argument", "abstain", "factors", "c1", "c2", "c3", "plaintiff"])
            | st.text(max_size=4),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
# Near-misses: JSON texts cut, glued to prose and fences, and the words the parsers look for.
jsonish = st.lists(
    st.one_of(
        json_values.map(json.dumps),
        json_values.map(lambda v: json.dumps(v)[: len(json.dumps(v)) // 2]),
        st.sampled_from(
            [
                "{",
                "}",
                '"',
                "\\",
                "```json\n",
                "```",
                "TERMINATE",
                "VALID_ARGUMENT",
                "REQUIRES_CORRECTION",
                "REQUIRES_ABSTENTION",
                "REVISE: yes",
                "\nrevise: NO\n",
                "</think>",
                '"F 4"',
                '"abstain": "true"',
            ]
        ),
        st.text(max_size=6),
    ),
    max_size=12,
).map("".join)


def _check_ply(ply):
    assert isinstance(ply, ParsedPly)
    assert set(ply.factors) == {"c1", "c2", "c3"}
    cited = [f for ids in ply.factors.values() for f in ids]
    assert all(isinstance(f, str) and f.startswith("F") for f in cited)
    assert isinstance(ply.abstain, bool) and isinstance(ply.argument, str)
    assert ply.valid or ply.error


@given(st.one_of(st.text(), jsonish))
def test_parsers_never_raise(text):
    _check_ply(parse_ply(text))
    for ply in parse_three_plies(text):
        _check_ply(ply)
    verdict = parse_verdict(text)
    assert verdict.label in (None, "VALID_ARGUMENT", "REQUIRES_CORRECTION", "REQUIRES_ABSTENTION")
    assert (verdict.label is None) == (verdict.error is not None)
    review = parse_review(text)
    assert isinstance(review.revise, bool) and isinstance(review.feedback, str)


@given(json_values)
def test_any_json_value_as_a_ply_never_raises(value):
    _check_ply(parse_ply(json.dumps(value)))
    for ply in parse_three_plies(json.dumps({"plaintiff": value, "rebuttal": value})):
        _check_ply(ply)


PLY = {
    "argument": 'Like c2, c1 has F4 (Agreed-not-to-disclose). {"braces": "in a string"}',
    "abstain": False,
    "factors": {"c1": ["F4"], "c2": ["F4", "F16"], "c3": []},
}


def test_a_clean_ply():
    ply = parse_ply(json.dumps(PLY))
    assert ply == ParsedPly(
        argument=PLY["argument"],
        abstain=False,
        factors={"c1": ("F4",), "c2": ("F4", "F16"), "c3": ()},
        valid=True,
        error=None,
    )


def test_fences_prose_and_the_last_object():
    fenced = f"Here is my ply:\n```json\n{json.dumps(PLY, indent=2)}\n```\nHope this helps {{:"
    assert parse_ply(fenced).valid and parse_ply(fenced).factors["c2"] == ("F4", "F16")
    draft = {**PLY, "factors": {"c1": ["F1"], "c2": [], "c3": []}}
    two = f"Draft: {json.dumps(draft)}\nFinal: {json.dumps(PLY)} end"
    assert parse_ply(two).factors["c1"] == ("F4",)
    # The nested `factors` object is not a top-level object of its own.
    assert last_json_object(json.dumps(PLY)) == PLY
    assert last_json_object('{"a": {"b": 1}} and {"c": 2') == {"a": {"b": 1}}
    # A reasoning model's scratch pad is not the answer.
    thinking = f"<think>{json.dumps(draft)} maybe TERMINATE?</think>{json.dumps(PLY)}"
    assert parse_ply(thinking).factors["c1"] == ("F4",)


def test_factor_ids_are_normalised_and_bad_entries_noted():
    ply = parse_ply(
        json.dumps(
            {
                "argument": "x",
                "abstain": "true",
                "factors": {"c1": ["F 4", "f04", "F99", "Security-measures"], "c2": [], "c3": []},
            }
        )
    )
    assert ply.abstain is True and ply.factors["c1"] == ("F4", "F99")
    # A string that is no factor id is dropped, the ply's types were still right.
    assert ply.valid and "'Security-measures' is no factor id" in ply.error
    not_strings = parse_ply(
        '{"argument": "x", "abstain": " FALSE ", "factors": {"c1": [4], "c2": [], "c3": []}}'
    )
    assert not_strings.abstain is False and not not_strings.valid
    assert not_strings.factors == EMPTY


def test_missing_or_mistyped_keys_make_an_invalid_ply():
    cases = {
        '{"abstain": false, "factors": {"c1": [], "c2": [], "c3": []}}': "`argument`",
        '{"argument": "a", "abstain": "maybe", "factors": {"c1": [], "c2": [], "c3": []}}': (
            "`abstain`"
        ),
        '{"argument": "a", "abstain": false, "factors": ["F4"]}': "`factors`",
        '{"argument": "a", "abstain": false, "factors": {"c1": [], "c2": []}}': "`factors.c3`",
    }
    for text, key in cases.items():
        ply = parse_ply(text)
        assert not ply.valid and key in ply.error, text
        assert ply.abstain is False
    # Without a usable flag, an argument that says TERMINATE abstains.
    ply = parse_ply('{"argument": "TERMINATE: no shared factor", "factors": {}}')
    assert ply.abstain and not ply.valid


def test_terminate_in_free_text():
    ply = parse_ply("There is no overlap between c1 and c2.\nTERMINATE")
    assert ply.abstain and not ply.valid and "TERMINATE" in ply.error
    assert ply.factors == EMPTY
    for text in ("", "I would not terminate here.", "TERMINATED", "an argument without JSON"):
        ply = parse_ply(text)
        assert not ply.abstain and not ply.valid and ply.factors == EMPTY


def test_three_plies():
    abstention = {"argument": "TERMINATE: c2 lost.", "abstain": True, "factors": EMPTY}
    text = json.dumps({"plaintiff": PLY, "defendant": abstention, "rebuttal": "TERMINATE"})
    plaintiff, defendant, rebuttal = parse_three_plies(f"```json\n{text}\n```")
    assert plaintiff.valid and not plaintiff.abstain and plaintiff.factors["c1"] == ("F4",)
    assert defendant.valid and defendant.abstain
    assert rebuttal.abstain and not rebuttal.valid and "rebuttal" in rebuttal.error
    plaintiff, defendant, rebuttal = parse_three_plies(json.dumps({"plaintiff": PLY}))
    assert plaintiff.valid
    assert not defendant.valid and "no `defendant` ply" in defendant.error
    assert not rebuttal.abstain and rebuttal.factors == EMPTY
    plies = parse_three_plies("All three plies: TERMINATE.")
    assert all(p.abstain and not p.valid for p in plies)
    assert not any(p.abstain or p.valid for p in parse_three_plies("no idea"))


def test_verdicts():
    assert parse_verdict("Factors check out.\nVALID_ARGUMENT").label == "VALID_ARGUMENT"
    text = "Not VALID_ARGUMENT: F5 is not in c2.\nREQUIRES_CORRECTION"
    verdict = parse_verdict(text)
    assert verdict.label == "REQUIRES_CORRECTION" and verdict.feedback == text
    assert verdict.error is None
    assert parse_verdict("No overlap with c2. TERMINATE").label == "REQUIRES_ABSTENTION"
    assert parse_verdict('{"analysis_outcome": "REQUIRES_ABSTENTION"}').label == (
        "REQUIRES_ABSTENTION"
    )
    assert parse_verdict("TERMINATE? no: VALID_ARGUMENT").label == "VALID_ARGUMENT"
    # INVALID_ARGUMENT is no label; lower case is prose.
    for text in ("INVALID_ARGUMENT", "valid_argument", "looks fine", ""):
        verdict = parse_verdict(text)
        assert verdict.label is None and verdict.error


def test_reviews():
    review = parse_review("Clear and grounded.\nREVISE: no")
    assert review == parse_review("Clear and grounded.\n**revise: No**\n")
    assert not review.revise and review.feedback == "Clear and grounded." and review.error is None
    review = parse_review("Use F6 too.\nREVISE: yes\nThanks.")
    assert review.revise and review.feedback == "Use F6 too.\n\nThanks."
    assert parse_review("REVISE: yes\nREVISE: no").revise is False
    for text in ("I would revise: yes", "REVISE: maybe", ""):
        review = parse_review(text)
        assert not review.revise and review.error
