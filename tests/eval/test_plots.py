"""The before/after figure and the panels the trainer draws on it."""

from types import SimpleNamespace

from PIL import Image

from lexrl.eval.plots import headline_panels, plot_before_after


def test_panels_take_each_members_headline_metric():
    gdpr = SimpleNamespace(headline_metric="accuracy")
    statute = SimpleNamespace(headline_metric="mas_recall")
    mixture = SimpleNamespace(name="mix", member_envs=lambda: {"gdpr": gdpr, "statute": statute})
    ci = {"mean": 0.5, "low": 0.4, "high": 0.6}
    intervals = {"before": {"gdpr/accuracy": ci, "statute/mas_recall": ci}, "after": {}}
    assert headline_panels(mixture, intervals) == [
        ("gdpr", "accuracy", ci, None),
        ("statute", "mas_recall", ci, None),
    ]
    single = SimpleNamespace(name="gdpr", headline_metric="accuracy", member_envs=dict)
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
