import pytest
from hypothesis import given
from hypothesis import strategies as st

from lexrl.envs.lexam.reward import mcq_reward, parse_mcq_answer_lexam_parity, total
from lexrl.envs.mcq import format_choices, option_label, parse_mcq_answer

# Text made mostly of marker pieces, so the parsers meet near-misses, not just noise.
marker_text = st.lists(
    st.one_of(
        st.sampled_from(["###", "#", "A", "D", "Z", "a", "1", "32", "07", "</think>", " ", "\n"]),
        st.text(max_size=5),
    ),
    max_size=30,
).map("".join)


@given(st.one_of(st.text(), marker_text), st.integers(min_value=1, max_value=40))
def test_parsers_never_raise_and_answer_in_range(text, n_options):
    answer = parse_mcq_answer(text, n_options)
    assert answer is None or 0 <= answer < n_options
    parity = parse_mcq_answer_lexam_parity(text)
    assert parity is None or 0 <= parity < 4


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=6), marker_text)
def test_last_marker_wins(answers, filler):
    filler = filler.replace("#", "").replace("</think>", "")
    text = filler.join(f"Correct Answer: ###{'ABCD'[a]}###" for a in answers)
    assert parse_mcq_answer(text, 4) == answers[-1]
    assert parse_mcq_answer_lexam_parity(text) == answers[-1]


def test_labels():
    assert [option_label(i, 4) for i in range(4)] == ["A", "B", "C", "D"]
    assert option_label(25, 26) == "Z"
    # Above 26 options every option is numbered, the first one too.
    assert [option_label(i, 32) for i in (0, 25, 26, 31)] == ["1", "26", "27", "32"]
    with pytest.raises(ValueError):
        option_label(4, 4)
    assert format_choices(["yes", "no"]) == "\nA. yes\nB. no"
    assert format_choices([str(i) for i in range(27)]).startswith("\n1. 0\n2. 1\n")


def test_parse_mcq_answer():
    assert parse_mcq_answer("Correct Answer: ###C###", 4) == 2
    assert parse_mcq_answer("###B### then ###E###", 4) == 1  # E is no option of four
    assert parse_mcq_answer("###E###", 8) == 4
    assert parse_mcq_answer("###c###", 4) is None
    assert parse_mcq_answer("Answer: C", 4) is None
    assert parse_mcq_answer("###A###B###", 4) == 1
    assert parse_mcq_answer("###32### ###A###", 32) == 31
    assert parse_mcq_answer("###33###", 32) is None
    assert parse_mcq_answer("###07###", 32) is None
    assert parse_mcq_answer("###0###", 32) is None
    assert parse_mcq_answer("###26###", 26) is None
    # The scratch pad before the last </think> cannot answer.
    assert parse_mcq_answer("<think>###A###</think>no marker", 4) is None
    assert parse_mcq_answer("<think>###A###</think>x</think>###D###", 4) == 3


def test_parity_parser_is_the_authors_scorer():
    assert parse_mcq_answer_lexam_parity("###A### ... ###D###") == 3
    assert parse_mcq_answer_lexam_parity("###E###") is None
    assert parse_mcq_answer_lexam_parity("<think>###B###</think> no marker") == 1
    assert parse_mcq_answer_lexam_parity("") is None


@pytest.mark.parametrize(
    ("text", "normalised", "expected"),
    [
        ("###B###", False, {"correct": 1.0, "format": 1.0}),
        ("###C###", False, {"correct": 0.0, "format": -1 / 3}),
        ("B", False, {"correct": 0.0, "format": -1 / 3}),
        ("###B###", True, {"correct": 1.0, "format": 1.0}),
        ("###C###", True, {"correct": -1 / 3, "format": -1 / 3}),
        ("no answer", True, {"correct": -1 / 3, "format": -1 / 3}),
        ("", True, {"correct": -1 / 3, "format": -1 / 3}),
    ],
)
def test_mcq_reward_components(text, normalised, expected):
    assert mcq_reward(text, gold=1, n_options=4, chance_normalised=normalised) == pytest.approx(
        expected
    )


@pytest.mark.parametrize("component", ["correct", "format"])
def test_a_guess_earns_nothing_beyond_chance_in_expectation(component):
    """Averaged over every label a guess can name, the chance-normalised `correct` and the
    `format` credit are 0 whatever the option count: a constant letter on balanced gold labels
    earns none of the format credit."""
    for k in (4, 8, 16, 32):
        rewards = [
            mcq_reward(f"###{option_label(i, k)}###", 0, k, chance_normalised=True)[component]
            for i in range(k)
        ]
        assert sum(rewards) / k == pytest.approx(0.0)
        assert rewards[1] == pytest.approx(-1 / (k - 1))


def test_total_weights_the_format_component():
    components = mcq_reward("###C###", gold=1, n_options=4)
    assert total(components, format_weight=0.3) == pytest.approx(-0.1)
    assert total(components, format_weight=0.0) == 0.0
    assert total(mcq_reward("###B###", 1, 4), format_weight=0.5) == pytest.approx(1.5)
    # A constant letter on four questions, one per gold letter: its accuracy 1/4 and no more
    # (the teacher earns 1.5), where a flat credit for the marker would add the full 0.5.
    always_a = [total(mcq_reward("###A###", gold, 4), format_weight=0.5) for gold in range(4)]
    assert sum(always_a) / 4 == pytest.approx(0.25)
    with pytest.raises(ValueError):
        mcq_reward("###A###", gold=4, n_options=4)


@given(
    st.one_of(st.text(), marker_text),
    st.integers(min_value=2, max_value=40),
    st.booleans(),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_no_reply_earns_more_than_a_marked_wrong_answer(text, n_options, normalised, weight):
    """Whatever a reply says, when it does not name the gold option it earns what a marked wrong
    answer earns, component by component: not answering is never paid better than answering
    wrong (a model below chance was once paid to stop marking, docs/envs/lexam.md)."""
    gold = 0 if parse_mcq_answer(text, n_options) != 0 else 1
    wrong_label = option_label((gold + 1) % n_options, n_options)
    wrong = mcq_reward(f"###{wrong_label}###", gold, n_options, normalised)
    components = mcq_reward(text, gold, n_options, normalised)
    for name in ("correct", "format"):
        assert components[name] == pytest.approx(wrong[name])
    assert total(components, weight) == pytest.approx(total(wrong, weight))


def test_answering_beats_silence_in_expectation_on_the_demos_reward():
    """On the CPU demo's reward (four options, weight 0.5) an unmarked reply earns -1/6 on every
    question, as a marked wrong letter does, below a constant letter's 0.25 on balanced gold labels
    (`test_total_weights_the_format_component`): silence is the worst a policy can do."""
    silent = [total(mcq_reward("I do not know.", gold, 4), 0.5) for gold in range(4)]
    assert silent == pytest.approx([-1 / 6] * 4)
    # With chance-normalised `correct` a constant letter earns 0 and silence -0.5.
    normalised = [total(mcq_reward("###A###", g, 4, True), 0.5) for g in range(4)]
    assert sum(normalised) / 4 == pytest.approx(0.0)
    assert total(mcq_reward("", 0, 4, True), 0.5) == pytest.approx(-0.5)
