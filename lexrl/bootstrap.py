"""Percentile-bootstrap confidence intervals of a mean over queries (scipy.stats.bootstrap)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import bootstrap


def format_interval(interval: dict[str, float], digits: int = 4, bound_digits: int = 3) -> str:
    """A `mean_with_ci` interval as `mean [low, high]`."""
    low, high = interval["low"], interval["high"]
    return f"{interval['mean']:.{digits}f} [{low:.{bound_digits}f}, {high:.{bound_digits}f}]"


def mean_with_ci(
    values: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> dict[str, float]:
    """{"mean", "low", "high"} of per-query `values` (shape (n_queries,)); queries are resampled
    with replacement. A constant or single value has a zero-width interval."""
    array = np.asarray(values, dtype=np.float64)
    mean = float(array.mean()) if array.size else float("nan")
    if array.size < 2 or np.all(array == array[0]):
        return {"mean": mean, "low": mean, "high": mean}
    result = bootstrap(
        (array,),
        np.mean,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    interval = result.confidence_interval
    return {"mean": mean, "low": float(interval.low), "high": float(interval.high)}
