"""The before/after figure and the panels the trainer draws on it; an evaluation's figure."""

from types import SimpleNamespace

from PIL import Image

from lexrl.envs.mixture import MixtureEnv
from lexrl.eval.plots import (
    EVALUATION_LEGEND,
    evaluation_panel,
    headline_panels,
    plot_bars,
    plot_before_after,
)


def test_panels_take_each_members_headline_metric():
    gdpr = SimpleNamespace(roles=(), headline_metric="accuracy")
    statute = SimpleNamespace(roles=(), headline_metric="mas_recall")
    mixture = MixtureEnv({"gdpr": gdpr, "statute": statute}, {"gdpr": 0.5, "statute": 0.5})
    ci = {"mean": 0.5, "low": 0.4, "high": 0.6}
    intervals = {"before": {"gdpr/accuracy": ci, "statute/mas_recall": ci}, "after": {}}
    assert headline_panels(mixture, intervals) == [
        ("gdpr", "accuracy", ci, None),
        ("statute", "mas_recall", ci, None),
    ]
    single = SimpleNamespace(name="gdpr", headline_metric="accuracy")
    assert headline_panels(single, {"before": {"accuracy": ci}, "after": {"accuracy": ci}}) == [
        ("gdpr", "accuracy", ci, ci)
    ]


def test_the_figure_has_a_panel_per_env(tmp_path):
    ci = {"mean": 0.5, "low": 0.4, "high": 0.6}
    one = plot_before_after(tmp_path / "one.png", [("gdpr", "accuracy", ci, ci)])
    three = plot_before_after(
        tmp_path / "three.png",
        [("gdpr", "accuracy", ci, ci), ("statute", "mas_recall", ci, None), ("x", "y", None, None)],
    )
    # Panels sit side by side: three are about three times as wide as one.
    assert Image.open(three).width > 2.5 * Image.open(one).width


def test_an_evaluation_panel_puts_the_policy_beside_the_teacher_and_the_degenerate_policies():
    ci = {"mean": 0.5, "low": 0.4, "high": 0.6}
    env, metric, bars = evaluation_panel(
        "gdpr", "accuracy", "step-000060", ci, [("teacher", 1.0), ("empty", 0.0), ("echo", None)]
    )
    assert (env, metric) == ("gdpr", "accuracy")
    assert [(label, value) for label, value, _ in bars] == [
        ("step-000060", ci),
        ("teacher", {"mean": 1.0}),
        ("empty", {"mean": 0.0}),
    ]
    assert len({colour for _, _, colour in bars}) == 3
    # Every episode failed: no policy bar.
    assert [label for label, _, _ in evaluation_panel("x", "y", "p", None, [])[2]] == []


def test_the_evaluation_figure_is_a_png_with_an_env_a_row(tmp_path):
    ci = {"mean": 0.5, "low": 0.4, "high": 0.6}
    panels = [
        evaluation_panel(name, "accuracy", "base", ci, [("teacher", 1.0), ("always_Yes", 0.5)])
        for name in ("gdpr", "lexam", "argument")
    ]
    path = plot_bars(tmp_path / "eval_test_headline.png", panels, EVALUATION_LEGEND, columns=1)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    image = Image.open(path)
    assert image.format == "PNG" and image.height > 2.5 * image.width
