"""CSAID loading on files written in the release's format (the data itself is not shipped)."""

import json

import pytest

from lexrl.envs.statute.data import load_csaid, normalise_article
from lexrl.envs.statute.env import StatuteEnv
from lexrl.envs.statute.options import StatuteEnvConfig
from lexrl.errors import DatasetError

CORPUS = [
    "中华人民共和国民法典(2020), 第一千零七十九条:\n【离婚诉讼】夫妻一方要求离婚的，可以由有关组织进行调解。",
    "中华人民共和国劳动合同法(2012), 第三十条:\n【劳动报酬】用人单位应当按照劳动合同约定和国家规定，及时足额支付劳动报酬。",
    "中华人民共和国刑法(2020), 第二百六十四条:\n【盗窃罪】盗窃公私财物，数额较大的，处三年以下有期徒刑。",
]
QUERIES = {
    "1": {
        "query": "老板拖欠工资两个月怎么办",
        # full-width comma and extra spaces: still the same article once normalised
        "label": [
            "中华人民共和国劳动合同法(2012)， 第三十条:\n【劳动报酬】用人单位应当按照劳动合同约定和国家规定，及时足额支付劳动报酬。 "
        ],
        "label_length": 1,
    },
    "2": {
        "query": "偷了邻居的电动车会判几年，另外想离婚",
        "label": [CORPUS[2], CORPUS[0]],
        "label_length": 2,
    },
}


def _write(tmp_path, queries=QUERIES, corpus=CORPUS):
    (tmp_path / "q.json").write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    return tmp_path / "q.json", tmp_path / "c.json"


def test_gold_is_matched_by_normalised_text(tmp_path):
    queries, corpus = _write(tmp_path)
    data = load_csaid(queries, corpus)
    assert [(t.id, t.gold) for t in data.splits["test"]] == [("1", [1]), ("2", [2, 0])]
    assert data.corpus[1]["name"] == "中华人民共和国劳动合同法(2012), 第三十条"
    assert data.corpus[1]["content"].startswith("【劳动报酬】")
    assert not data.notes
    assert normalise_article("Ａ 条，\n x") == "A条,x"


def test_unmatched_gold_stops_unless_allowed(tmp_path):
    queries = dict(QUERIES)
    queries["3"] = {"query": "q", "label": ["不存在的法条:\n【无】"], "label_length": 1}
    queries_path, corpus_path = _write(tmp_path, queries)
    with pytest.raises(
        DatasetError, match=r"q\.json: 1 gold label\(s\) match no article .*3: '不存在的法条"
    ):
        load_csaid(queries_path, corpus_path)
    data = load_csaid(queries_path, corpus_path, allow_unmatched=True)
    assert [t.id for t in data.splits["test"]] == ["1", "2"]
    assert data.notes == [
        "query 3: 1 gold label(s) unmatched",
        "query 3: dropped, no gold label matches the corpus",
    ]


def test_malformed_files_name_the_file_and_entry(tmp_path):
    queries_path, corpus_path = _write(tmp_path, {"7": {"query": "q"}})
    with pytest.raises(DatasetError, match=r"q\.json: entry '7' lacks label"):
        load_csaid(queries_path, corpus_path)
    queries_path, corpus_path = _write(tmp_path, QUERIES, {"not": "a list"})
    with pytest.raises(DatasetError, match=r"c\.json: expected a JSON list of article strings"):
        load_csaid(queries_path, corpus_path)
    (tmp_path / "q.json").write_text('{"1": {"query": "q", "label": []}', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"q\.json"):
        load_csaid(tmp_path / "q.json", corpus_path)
    with pytest.raises(DatasetError, match="missing.json"):
        load_csaid(tmp_path / "missing.json")


def test_csaid_env_without_a_corpus_uses_the_gold_union_and_says_so(tmp_path):
    queries_path, _ = _write(tmp_path)
    env = StatuteEnv.from_config(
        StatuteEnvConfig(dataset="csaid", language="zh", queries_path=str(queries_path))
    )
    stats = env.stats()
    assert stats["corpus_size"] == 3
    assert "gold-article union" in stats["corpus_source"]
    assert stats["test"]["queries"] == 2 and stats["test"]["mean_gold_per_query"] == 1.5
    assert env.search("盗窃 电动车 判几年", 1) == [env.tasks("test")[1].gold[0]]


def test_a_repeated_label_is_a_duplicate_not_unmatched(tmp_path):
    queries = {
        **QUERIES,
        # the same article twice, the second time with other whitespace
        "3": {"query": "q", "label": [CORPUS[1], CORPUS[1].replace("\n", "\n "), CORPUS[2]]},
    }
    queries_path, corpus_path = _write(tmp_path, queries)
    for corpus in (corpus_path, None):
        data = load_csaid(queries_path, corpus)
        assert data.notes == ["query 3: 1 duplicate gold label(s) (an article listed again)"]
        assert len(data.corpus) == 3
        env = StatuteEnv(data.corpus, data.splits, StatuteEnvConfig(dataset="csaid", language="zh"))
        stats = env.stats()["test"]
        assert stats["mean_gold_per_query"] == (1 + 2 + 2) / 3
        assert stats["mean_gold_labels_listed_per_query"] == (1 + 2 + 3) / 3
