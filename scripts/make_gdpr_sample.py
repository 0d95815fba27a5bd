"""Write the MASLegalBench sample shipped in the package (`lexrl/envs/gdpr/sample/`) from the
release's save_to_disk folder.

    python scripts/make_gdpr_sample.py [--source ../shared/data/maslegalbench/dataset]

Every row (all six types) of the four smallest cases (`CASES`: 132 of the 950 questions, about
215 KB) is copied, in the release's row order and unchanged, as one JSON line `{content, type,
source}`; then the sample is loaded with `load_maslegalbench` and its counts are printed as JSON
(the numbers in `sample/README.md`). The README and LICENSE_DATA beside it are written by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import datasets

from lexrl.envs.gdpr.data import COLUMNS, load_maslegalbench, stats

CASES = (
    "mermaids-mpn-20210705",
    "the-tavistock-portman-nhs-foundation-trust-mpn",
    "tuckers-mpn-20220228",
    "central-ymca-monetary-penalty-notice",
)
OUT = (
    Path(__file__).parents[1] / "lexrl" / "envs" / "gdpr" / "sample" / "maslegalbench.sample.jsonl"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="../shared/data/maslegalbench/dataset")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    loaded = datasets.load_from_disk(args.source)
    rows = loaded["train"] if isinstance(loaded, datasets.DatasetDict) else loaded
    kept = [
        json.dumps({column: row[column] for column in COLUMNS}, ensure_ascii=False)
        for row in rows
        if row["source"] in CASES
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    counts = stats(load_maslegalbench(str(args.out)))
    print(json.dumps({"rows": len(kept), "bytes": args.out.stat().st_size, **counts}, indent=1))


if __name__ == "__main__":
    main()
