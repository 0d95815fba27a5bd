"""Write the MASLegalBench sample shipped in the package (`sample/maslegalbench.sample.jsonl`)
from the release's save_to_disk folder, and print its counts as JSON (the numbers in
`sample/README.md`, which is written by hand beside LICENSE_DATA):

    python -m lexrl.envs.gdpr.make_sample --source <the release's dataset folder>

What ships (`sample_rows`): every chunk row and every A-D question of the six cases of `CASES`,
every No question of them, and per case a seeded draw of as many of its Yes questions as it has
No questions, all in the release's row order. The release's Yes/No questions are 78% "Yes"
(502 of 647), and in each of these cases Yes outnumbers No (15 to 11 up to 54 to 5); a held-out
split drawn from them as released is one a constant "Yes" answers right four times in five, so
an evaluation on it cannot tell a policy that reads the case from one that learned the prior.
Balancing within each case keeps the sample's Yes/No questions half "Yes" whichever cases a
split holds out, at the cost of the paper's label distribution: accuracies on the sample are
not comparable with the paper's, and its baselines (`data.random_baseline`,
`data.prior_baseline`) are those of the balanced questions.

`CASES` are the six whose balanced questions come cheapest in bytes while the split the CPU
configs use (`eval_fraction` 0.5, seed 0) holds out at least 100 questions of three cases and
trains on three others. Each question row keeps its position among its case's questions in the
release as `number`, so a question's id (`<case>#<n>`) is the same in the sample and the
release.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path

from lexrl.envs.gdpr.data import COLUMNS, default_sample, load_maslegalbench, stats
from lexrl.envs.gdpr.parsing import normalise_answer

CASES = (
    "advanced-penalty-notice-20250327",
    "central-ymca-monetary-penalty-notice",
    "dpp-law-ltd-monetary-penalty-notice",
    "interserve-group-limited-monetary-penalty-notice",
    "mermaids-mpn-20210705",
    "tuckers-mpn-20220228",
)
SEED = 0
"""Seed of the draw of each case's Yes questions."""


def _yes_no(row: Mapping) -> str | None:
    """The answer of a Yes/No question row, "Yes" or "No"; None for any other row."""
    if row["type"] != "question":
        return None
    answer = json.loads(row["content"])["correct_answer"]
    return normalise_answer(answer, "yes_no") if isinstance(answer, str) else None


def sample_rows(rows: Iterable[Mapping], cases: Iterable[str], seed: int) -> list[dict]:
    """The rows of `cases` that ship (see the module docstring), as `{content, type, source}`
    plus `number` on question rows, in the order of `rows`."""
    wanted = set(cases)
    kept = [{column: row[column] for column in COLUMNS} for row in rows if row["source"] in wanted]
    per_case: dict[str, int] = {}
    yes: dict[str, list[int]] = {}
    no: dict[str, int] = {}
    for index, row in enumerate(kept):
        if row["type"] != "question":
            continue
        per_case[row["source"]] = row["number"] = per_case.get(row["source"], 0) + 1
        label = _yes_no(row)
        if label == "Yes":
            yes.setdefault(row["source"], []).append(index)
        elif label == "No":
            no[row["source"]] = no.get(row["source"], 0) + 1
    rng = random.Random(seed)
    dropped = set()
    for case in sorted(yes):
        keep = set(rng.sample(yes[case], min(len(yes[case]), no.get(case, 0))))
        dropped |= set(yes[case]) - keep
    return [row for index, row in enumerate(kept) if index not in dropped]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="the release's save_to_disk folder")
    parser.add_argument("--out", type=Path, default=default_sample())
    args = parser.parse_args()
    import datasets

    loaded = datasets.load_from_disk(args.source)
    release = loaded["train"] if isinstance(loaded, datasets.DatasetDict) else loaded
    rows = sample_rows(release, CASES, SEED)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(row, ensure_ascii=False) for row in rows)
    args.out.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    counts = stats(load_maslegalbench(str(args.out)))
    print(json.dumps({"rows": len(rows), "bytes": args.out.stat().st_size, **counts}, indent=1))


if __name__ == "__main__":
    main()
