"""No degenerate policy earns more than `SHARE_BOUND` of the scripted teacher's reward on any env of
the CPU mixture (issue 25): a reward whose optimum a content-free policy can mostly reach teaches
that policy, not the task. Each env is audited by `lexrl.eval.audit.audit_env` on its held-out
tasks, as `lexrl audit configs/legal_mix_cpu.yaml` does."""

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.eval.audit import SHARE_BOUND, TEACHER, audit_env

ROOT = Path(__file__).resolve().parents[2]
MAX_TASKS = 30
"""Held-out tasks per env: all of argument's (10 per kind, interleaved) and gdpr's (15)."""


@pytest.fixture(scope="module")
def members():
    return make_env(load_config(ROOT / "configs/legal_mix_cpu.yaml").env).member_envs()


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.mark.parametrize("name", ["statute", "argument", "gdpr", "lexam"])
def test_no_degenerate_policy_earns_more_than_the_bound(name, members, tokenizer):
    env = members[name]
    rows = audit_env(name, env, env.tasks("test")[:MAX_TASKS], tokenizer)
    teacher, degenerate = rows[0], rows[1:]
    assert teacher.policy == TEACHER and teacher.failed == 0 and teacher.mean_reward > 0
    assert {row.policy for row in degenerate} == set(env.degenerate_policies())
    above = {row.policy: round(row.share, 3) for row in degenerate if row.share > SHARE_BOUND}
    assert not above, f"{name}: degenerate policies above {SHARE_BOUND:.0%} of the teacher"
