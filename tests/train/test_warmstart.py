"""The supervised warm-start's data: the scripted teacher's turns, never an endpoint judge's."""

import pytest
from transformers import AutoTokenizer

from lexrl.envs.gdpr.env import GdprEnv
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.rewards.judge import JudgeConfig
from lexrl.rewards.reference_judge import BUILTIN_URL
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
