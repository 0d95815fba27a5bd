import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.envs.argument.parsing import (
    Claim,
    ParsedPly,
    analogy,
    claimed_factors,
    distinction,
    last_json_object,
    normalise_case,
    parse_factor_lists,
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
            st.sampled_from(
                ["argument", "abstain", "analogies", "distinctions", "c1", "TSC1", "plaintiff"]
            )
            | st.text(max_size=4),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
# Claim-shaped entries, right and near-miss: a factor id or not, two case names or not.
claim_entries = st.lists(
    st.sampled_from(["F4", "f 2", "F99", "Security-measures", "c1", "Input Case", "TSC2", "c9", 4]),
    max_size=4,
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
                '"analogies": [["F4", "c1", "c2"]]',
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
    # A parsed ply's citations are always its claims' (no distiller read it).
    assert ply.claims is not None and ply.factors == claimed_factors(ply.claims)
    assert all(
        c.kind in ("analogy", "distinction") and c.cases[0] != c.cases[1] for c in ply.claims
    )


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
    factors, _ = parse_factor_lists(text)
    assert set(factors) == {"c1", "c2", "c3"}


@given(json_values)
def test_any_json_value_as_a_ply_never_raises(value):
    _check_ply(parse_ply(json.dumps(value)))
    for ply in parse_three_plies(json.dumps({"plaintiff": value, "rebuttal": value})):
        _check_ply(ply)


@given(st.lists(claim_entries, max_size=4), st.lists(claim_entries, max_size=4))
def test_any_claim_entries_parse_to_claims_or_a_named_error(analogies, distinctions):
    text = json.dumps(
        {"abstain": False, "analogies": analogies, "distinctions": distinctions, "argument": ""}
    )
    ply = parse_ply(text)
    _check_ply(ply)
    assert len(ply.claims) <= len(analogies) + len(distinctions)
    if not ply.valid:
        assert "dropped" in ply.error


PLY = {
    "abstain": False,
    "analogies": [["F4", "c1", "c2"]],
    "distinctions": [["F2", "c2", "c1"]],
    "argument": 'Like c2, c1 has F4; c2 has F2, which c1 lacks. {"braces": "in a string"}',
}


def test_a_clean_ply():
    ply = parse_ply(json.dumps(PLY))
    # The analogy cites F4 for both cases, the distinction F2 for c2 only (the case that has it).
    assert ply == ParsedPly(
        argument=PLY["argument"],
        abstain=False,
        factors={"c1": ("F4",), "c2": ("F2", "F4"), "c3": ()},
        valid=True,
        error=None,
        claims=(analogy("F4", "c1", "c2"), distinction("F2", "c2", "c1")),
    )
    assert [str(claim) for claim in ply.claims] == ["F4 shared by c1 and c2", "F2 in c2, not in c1"]


def test_an_analogy_is_one_claim_whichever_case_comes_first():
    assert (
        analogy("F4", "c2", "c1")
        == analogy("F4", "c1", "c2")
        == Claim("analogy", "F4", ("c1", "c2"))
    )
    # A distinction is ordered: the case that has the factor, then the one that lacks it.
    assert distinction("F2", "c2", "c1") != distinction("F2", "c1", "c2")
    both = {**PLY, "analogies": [["F4", "c1", "c2"], ["F4", "c2", "c1"]]}
    assert parse_ply(json.dumps(both)).claims == parse_ply(json.dumps(PLY)).claims


def test_factors_follow_from_the_claims_sorted_by_number_without_repeats():
    claims = (
        analogy("F12", "c1", "c3"),
        analogy("F4", "c1", "c2"),
        distinction("F4", "c1", "c3"),
        distinction("F23", "c1", "c2"),
        distinction("F16", "c2", "c1"),
    )
    # c1: F4 (analogy and distinction), F12 (analogy), F23 (distinction it has); c2: F4, and
    # F16 it has; c3: F12 (analogy), not F4 (the distinction says c3 lacks it).
    assert claimed_factors(claims) == {
        "c1": ("F4", "F12", "F23"),
        "c2": ("F4", "F16"),
        "c3": ("F12",),
    }
    assert claimed_factors(()) == EMPTY


@pytest.mark.parametrize(
    ("name", "case"),
    [
        ("c1", "c1"),
        (" C2 ", "c2"),
        ("Input Case", "c1"),
        ("input  case", "c1"),
        ("Current case", "c1"),
        ("TSC1", "c2"),
        ("tsc2", "c3"),
        ("c4", None),
        ("TSC3", None),
        ("", None),
        (2, None),
        (None, None),
    ],
)
def test_case_names_in_either_naming(name, case):
    assert normalise_case(name) == case


def test_claims_in_the_authors_case_names():
    authors = {
        **PLY,
        "analogies": [["F4", "TSC1", "Input Case"], ["f 5", "input case", "TSC2"]],
        "distinctions": [["F02", "TSC1", "Input Case"]],
    }
    ply = parse_ply(json.dumps(authors))
    assert ply.valid and ply.error is None
    assert ply.claims == (
        analogy("F4", "c1", "c2"),
        analogy("F5", "c1", "c3"),
        distinction("F2", "c2", "c1"),
    )
    assert ply.factors == {"c1": ("F4", "F5"), "c2": ("F2", "F4"), "c3": ("F5",)}


@pytest.mark.parametrize(
    ("key", "entry"),
    [
        ("analogies", ["F4", "c1"]),
        ("analogies", "F4 c1 c2"),
        ("analogies", ["F4", "c1", "c1"]),
        ("analogies", ["Security-measures", "c1", "c2"]),
        ("distinctions", ["F2", "c2", "c9"]),
        ("distinctions", ["F2", "c2", None]),
        ("distinctions", [4, "c2", "c1"]),
        ("distinctions", ["F2", "c2", "c1", "c3"]),
    ],
)
def test_a_malformed_claim_is_dropped_and_named(key, entry):
    ply = parse_ply(json.dumps({**PLY, key: [*PLY[key], entry]}))
    assert not ply.valid
    assert f"`{key}` entry {entry!r}" in ply.error and "dropped" in ply.error
    # The well-formed claims beside it are kept.
    assert ply.claims == parse_ply(json.dumps(PLY)).claims


def test_factor_ids_in_claims_are_normalised_and_unknown_ids_kept():
    ply = parse_ply(json.dumps({**PLY, "analogies": [["f04", "c1", "c2"], [" F 99 ", "c1", "c3"]]}))
    # F99 is no CATO factor, but citing it is a fabrication the metrics must see.
    assert ply.valid and ply.claims[:2] == (analogy("F4", "c1", "c2"), analogy("F99", "c1", "c3"))
    assert ply.factors["c3"] == ("F99",)


def test_fences_prose_and_the_last_object():
    fenced = f"Here is my ply:\n```json\n{json.dumps(PLY, indent=2)}\n```\nHope this helps {{:"
    assert parse_ply(fenced).valid and parse_ply(fenced).factors["c2"] == ("F2", "F4")
    draft = {**PLY, "analogies": [["F1", "c1", "c2"]]}
    two = f"Draft: {json.dumps(draft)}\nFinal: {json.dumps(PLY)} end"
    assert parse_ply(two).factors["c1"] == ("F4",)
    assert last_json_object(json.dumps(PLY)) == PLY
    # A nested object is not a top-level object of its own.
    assert last_json_object('{"a": {"b": 1}} and {"c": 2') == {"a": {"b": 1}}
    # A reasoning model's scratch pad is not the answer.
    thinking = f"<think>{json.dumps(draft)} maybe TERMINATE?</think>{json.dumps(PLY)}"
    assert parse_ply(thinking).factors["c1"] == ("F4",)


@pytest.mark.parametrize(
    ("ply", "key"),
    [
        ({"abstain": False, "analogies": [], "distinctions": []}, "`argument`"),
        ({"argument": "a", "abstain": "maybe", "analogies": [], "distinctions": []}, "`abstain`"),
        ({"argument": "a", "abstain": False, "distinctions": []}, "`analogies`"),
        (
            {"argument": "a", "abstain": False, "analogies": [], "distinctions": {}},
            "`distinctions`",
        ),
        # The old format's factor lists are no claims.
        ({"argument": "a", "abstain": False, "factors": {"c1": ["F4"]}}, "`analogies`"),
    ],
)
def test_missing_or_mistyped_keys_make_an_invalid_ply(ply, key):
    parsed = parse_ply(json.dumps(ply))
    assert not parsed.valid and key in parsed.error
    assert parsed.abstain is False and parsed.factors == EMPTY


def test_the_abstain_flag_decides_not_the_prose():
    flagged = parse_ply(json.dumps({**PLY, "abstain": " TRUE ", "argument": "An argument."}))
    assert flagged.abstain and flagged.valid
    # A TERMINATE in the prose of a ply whose flag says it argues does not abstain.
    arguing = parse_ply(json.dumps({**PLY, "argument": "TERMINATE"}))
    assert not arguing.abstain and arguing.valid
    # Without a usable flag, an argument that says TERMINATE abstains.
    ply = parse_ply('{"argument": "TERMINATE: no shared factor", "analogies": []}')
    assert ply.abstain and not ply.valid


def test_terminate_in_free_text():
    ply = parse_ply("There is no overlap between c1 and c2.\nTERMINATE")
    assert ply.abstain and not ply.valid and "TERMINATE" in ply.error
    assert ply.factors == EMPTY and ply.claims == ()
    for text in ("", "I would not terminate here.", "TERMINATED", "Like c2, c1 has F4."):
        ply = parse_ply(text)
        assert not ply.abstain and not ply.valid and ply.factors == EMPTY and ply.claims == ()


def test_three_plies():
    abstention = {"abstain": True, "analogies": [], "distinctions": [], "argument": "TERMINATE"}
    text = json.dumps({"plaintiff": PLY, "defendant": abstention, "rebuttal": "TERMINATE"})
    plaintiff, defendant, rebuttal = parse_three_plies(f"```json\n{text}\n```")
    assert plaintiff == parse_ply(json.dumps(PLY))
    assert defendant.valid and defendant.abstain
    assert rebuttal.abstain and not rebuttal.valid and "rebuttal" in rebuttal.error
    plaintiff, defendant, rebuttal = parse_three_plies(json.dumps({"plaintiff": PLY}))
    assert plaintiff.valid
    assert not defendant.valid and "no `defendant` ply" in defendant.error
    assert not rebuttal.abstain and rebuttal.factors == EMPTY
    malformed = {**PLY, "distinctions": [["F2", "c2"]]}
    _, defendant, _ = parse_three_plies(json.dumps({"defendant": malformed}))
    assert not defendant.valid and "defendant: `distinctions` entry ['F2', 'c2']" in defendant.error
    plies = parse_three_plies("All three plies: TERMINATE.")
    assert all(p.abstain and not p.valid for p in plies)
    assert not any(p.abstain or p.valid for p in parse_three_plies("no idea"))


def test_the_distillers_factor_lists_in_either_naming():
    # The authors' distiller names the cases "Input Case", "TSC1", "TSC2" and writes a factor
    # with its name and side.
    reply = 'Factors: {"Input Case": ["F4 Agreed-not-to-disclose (P)", "F 23"], "TSC1": ["F4"], "TSC2": []}'
    assert parse_factor_lists(reply) == ({"c1": ("F4", "F23"), "c2": ("F4",), "c3": ()}, None)
    # A case left out beside the others cites nothing; a name without its id is dropped, the
    # object's shape still right.
    factors, error = parse_factor_lists('{"c1": ["F4", "Security-measures"], "TSC-1": []}')
    assert factors == {"c1": ("F4",), "c2": (), "c3": ()} and error is None
    factors, error = parse_factor_lists('{"verdict": ["F4"]}')
    assert factors == EMPTY and "`c1` is missing" in error
    assert parse_factor_lists("no JSON")[0] == EMPTY


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
