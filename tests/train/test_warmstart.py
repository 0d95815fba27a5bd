"""The supervised warm-start's data: the scripted teacher's turns, never an endpoint judge's."""

import shutil

import pytest
from transformers import AutoTokenizer

from lexrl.config import ModelConfig, WarmstartConfig
from lexrl.envs.gdpr.env import GdprEnv
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.models import load_base
from lexrl.rewards.judge import JudgeConfig
from lexrl.rewards.reference_judge import BUILTIN_URL
from lexrl.train import warmstart
from lexrl.train.warmstart import scripted_rows


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


def test_an_endpoint_judges_replies_are_no_warm_start_rows(tokenizer, tmp_path):
    judge = JudgeConfig(BUILTIN_URL, "reference-overlap")
    env = LexamEnv(
        LexamEnvConfig(config="open_question", judges=[judge], judge_cache_dir=str(tmp_path))
    )
    tasks = env.warmstart_tasks()
    rows = scripted_rows(env, tokenizer, len(tasks), seed=0)
    # One examinee turn per episode; the judge's turns (recorded, not trainable) are left out.
    assert [row.role for row in rows] == ["examinee"] * len(tasks)
    answers = [tokenizer.decode(row.completion_ids, skip_special_tokens=True) for row in rows]
    assert [a.split() for a in answers] == [t.gold.split() for t in tasks]


def test_an_env_whose_teacher_has_no_tasks_is_a_clear_error(tokenizer):
    env = GdprEnv(GdprEnvConfig(system="live"))
    with pytest.raises(ValueError, match="warmstart.enabled: false"):
        scripted_rows(env, tokenizer, 4, seed=0)


def test_the_warm_start_is_fine_tuned_once_and_then_reused(
    tiny_model_path, statute_env, tmp_path, monkeypatch, capsys
):
    base = tmp_path / "tiny-base"
    shutil.copytree(tiny_model_path, base)
    config = WarmstartConfig(enabled=True, num_episodes=4, epochs=1, batch_size=4)
    calls = []
    finetune = warmstart.supervised_finetune
    monkeypatch.setattr(
        warmstart, "supervised_finetune", lambda *a, **k: calls.append(1) or finetune(*a, **k)
    )

    def load(path):
        return load_base(ModelConfig(), path=path)

    built = warmstart.build_warmstarted_base(statute_env, base, config, 0, load)
    assert len(calls) == 1 and (built / "config.json").is_file()
    assert capsys.readouterr().out.count("SFT steps on") == 1
    assert warmstart.build_warmstarted_base(statute_env, base, config, 0, load) == built
    assert len(calls) == 1 and "warm-start: cached " in capsys.readouterr().out
