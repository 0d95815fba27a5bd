#!/usr/bin/env bash
# Fetch the STARD release (github.com/oneal2000/STARD, MIT licence) into data/stard/:
#   queries.json   1,543 queries with their gold articles
#   corpus.jsonl   the 55,348 candidate articles, {"id", "name", "content"} a line
#   split.json     the 1,234/309 train/test split later work uses (shipped with lexrl; copied
#                  here so the folder is complete)
# configs/stard_mas_grpo.yaml and configs/stard_eval.yaml read these paths.
#
# CSAID (118 queries, 79,055-article corpus) is published at github.com/lyxx3rd/CSAID; put its
# query dict at data/csaid/queries.json and its corpus list at data/csaid/corpus.json for
# configs/csaid_eval.yaml.
#
# Usage: bash scripts/prepare_stard.sh [target folder, default data/stard]
set -euo pipefail

target="${1:-data/stard}"
base="https://raw.githubusercontent.com/oneal2000/STARD/main/data"
mkdir -p "$target"

for file in queries.json corpus.jsonl; do
    if [[ -s "$target/$file" ]]; then
        echo "$target/$file exists, kept"
        continue
    fi
    echo "downloading $base/$file"
    if ! curl -fL --retry 3 -o "$target/$file.part" "$base/$file"; then
        echo "error: could not download $base/$file" >&2
        echo "download it by hand from https://github.com/oneal2000/STARD (data/$file) into $target/" >&2
        exit 1
    fi
    mv "$target/$file.part" "$target/$file"
done

python -c "from lexrl.envs.statute.data import default_stard_split; print(default_stard_split())" \
    | xargs -I{} cp {} "$target/split.json"

python - "$target" <<'PY'
import json, sys
from pathlib import Path

folder = Path(sys.argv[1])
articles = sum(1 for line in (folder / "corpus.jsonl").open(encoding="utf-8") if line.strip())
queries = len(json.loads((folder / "queries.json").read_text(encoding="utf-8")))
print(f"{folder}: {queries} queries, {articles} corpus articles (the release has 1,543 and 55,348)")
PY
