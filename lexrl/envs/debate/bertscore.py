"""BERTScore F1 of open-ended answers against the reference answer (the MAD_legal technical
report, "Multi-Agent Debate for Brazilian Legal Reasoning" (2024), sec. 5.2.2), through the
`bert-score` package (Zhang et al. 2020): greedy matching of contextual token embeddings,
no IDF weighting, no baseline rescaling (the package has no baseline for Portuguese models).

The paper's model is BERTimbau, `neuralmind/bert-base-portuguese-cased`; any Hub id or local
model folder works, offline too (HF_HUB_OFFLINE=1) when the folder or the Hub cache holds it.
`num_layers` None reads the layer the package tuned for the model when it has one, else the
model's last layer (BERTimbau is not in the package's table and the report does not say which
layer it read). A model is loaded once per process and (model, layers, device).

Texts are cut to the model's length (512 tokens for BERT models), as the package does; a
tokenizer that declares no length (BERTimbau's) is given the model's position count, so a long
answer is cut instead of crashing. A blank candidate or reference scores 0.0, the package's
own rule, without reaching the model.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _scorer(model: str, num_layers: int | None, device: str | None) -> Any:
    try:
        from bert_score import BERTScorer
        from bert_score.utils import model2layers
    except ImportError as error:
        raise ImportError(
            "BERTScore needs the bert-score package: pip install bert-score "
            "(it is in lexrl's dev extra: pip install -e '.[dev]')"
        ) from error
    if num_layers is None:
        from transformers import AutoConfig

        num_layers = model2layers.get(model) or AutoConfig.from_pretrained(model).num_hidden_layers
    scorer = BERTScorer(model_type=model, num_layers=num_layers, device=device)
    # bert-score keeps its tokenizer and model private; this is the one place that reaches in.
    positions = getattr(scorer._model.config, "max_position_embeddings", None)
    if positions is not None and scorer._tokenizer.model_max_length > positions:
        scorer._tokenizer.model_max_length = positions
    return scorer


def bertscore_f1(
    candidates: list[str],
    references: list[str],
    model: str,
    num_layers: int | None = None,
    batch_size: int = 16,
    device: str | None = None,
) -> list[float]:
    """BERTScore F1 of each candidate against the reference at the same index, in [-1, 1]
    (in practice about 0.5-1 for the same language). `device` None: CUDA when available.

    Raises ImportError naming the pip install when `bert-score` is missing, ValueError when the
    lists differ in length.
    """
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} references")
    scored = [
        i
        for i, (candidate, reference) in enumerate(zip(candidates, references, strict=True))
        if candidate.strip() and reference.strip()
    ]
    f1 = [0.0] * len(candidates)
    if not scored:
        return f1
    _, _, values = _scorer(model, num_layers, device).score(
        [candidates[i] for i in scored], [references[i] for i in scored], batch_size=batch_size
    )
    for i, value in zip(scored, values.tolist(), strict=True):
        f1[i] = value
    return f1
