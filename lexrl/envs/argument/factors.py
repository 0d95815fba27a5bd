"""The 26 CATO trade-secret factors (Aleven 1997; HYPO, Ashley 1990) the argument task's cases are
made of, from the shipped `cato_factors.json` (F1..F27, no F9). Each favours the plaintiff ("P")
or the defendant ("D"). Factors are matched by id, never by name (docs/sources.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Factor:
    id: str
    """F1..F27 (there is no F9)."""
    name: str
    """CATO's short name, e.g. "Agreed-not-to-disclose"."""
    favors: str
    """Which side the factor favours: "P" (plaintiff) or "D" (defendant)."""


def _load() -> dict[str, Factor]:
    text = (resources.files("lexrl.envs.argument") / "cato_factors.json").read_text("utf-8")
    factors = [Factor(**entry) for entry in json.loads(text)["factors"]]
    return {factor.id: factor for factor in factors}


FACTORS: dict[str, Factor] = _load()
"""Id -> factor, in factor-number order."""

# "F4", "f4", " F 4 ", "F04"; a name may follow after a separator ("F4 (Agreed-not-to-disclose)")
# since models copy the prompt's rendering into their lists.
_ID = re.compile(r"\s*F\s*0*(\d{1,4})(?!\d)(.*)", re.IGNORECASE | re.DOTALL)
_ANY_ID = re.compile(r"\bF\s*\d", re.IGNORECASE)


def normalise_factor_id(text: str) -> str | None:
    """The id `F<n>` of a text naming one factor number ("f4", " F 4 ", "F04",
    "F4 (Agreed-not-to-disclose)" -> "F4"), else None ("Agreed-not-to-disclose", "F4x", "F4, F6").

    Numbers outside the factor list are kept ("F99", "F9"): citing a factor that does not exist
    is a hallucination, and the metrics can only count it if it survives parsing. A name after
    the number is ignored, even a wrong one: the id is what is matched.
    """
    match = _ID.fullmatch(text)
    if match is None:
        return None
    rest = match.group(2)
    if rest[:1].isalnum() or rest[:1] == "_" or _ANY_ID.search(rest):
        return None
    return f"F{int(match.group(1))}"


def factor_number(factor_id: str) -> int:
    """The number of a normalised id ("F12" -> 12), the order factor ids are sorted in."""
    return int(factor_id[1:])
