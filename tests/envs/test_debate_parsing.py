"""Reading the option a debater argues or a judge picks, on hand-written and arbitrary text."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.envs.debate.parsing import decision, position, stated_options


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("###B### because consideration is missing.", 1, 1),
        ("I argue ###A###, not ###C###.", 0, 2),
        ("D. i and iii\n\nThe answer is D. i and iii.", 3, 3),
        ("The answer is C.", 2, 2),
        ("Answer: (B)", 1, 1),
        ("**Answer:** **C**", 2, 2),
        ("(A) is right. Final answer: D", 0, 3),
        ("I choose option B over option A.", 1, 0),
        ("The answer is a complex one.", None, None),  # lower case: no label
        ("A. i and ii\nC. i and iii\nD. i and iii", 0, 0),  # a listing picks its first line only
        ("Option E", None, None),  # out of range for four options
        ("", None, None),
        ("<think>answer is A</think>The answer is B", 1, 1),
        ("###A### then the answer is C", 0, 0),  # markers win over stated forms
    ],
)
def test_hand_written_replies(text, first, last):
    assert position(text, 4) == first
    assert decision(text, 4) == last


@given(st.text(), st.integers(min_value=1, max_value=26))
def test_arbitrary_text_never_raises_and_stays_in_range(text, n_options):
    options = stated_options(text, n_options)
    assert all(0 <= option < n_options for option in options)
    assert position(text, n_options) == (options[0] if options else None)
