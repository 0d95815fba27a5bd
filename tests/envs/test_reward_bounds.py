"""No degenerate policy earns more than `SHARE_BOUND` of the scripted teacher's reward on any env of
the CPU mixture (issues 25 and 31): a reward whose optimum a content-free policy or a cheap rule
over the prompt can mostly reach teaches that policy, not the task. Each env is audited by
`lexrl.eval.audit.audit_env` on all its held-out tasks, every reply cut at the mixture's token cap
by the mixture's own tokenizer, as `lexrl audit configs/legal_mix_cpu.yaml` does."""

from pathlib import Path

import pytest

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.eval.audit import SHARE_BOUND, TEACHER, audit_env
from lexrl.models import config_tokenizer

ROOT = Path(__file__).resolve().parents[2]
MAX_CUT = 0.05
"""The teacher's replies must fit the cap: at most this share cut (issue 31)."""


@pytest.fixture(scope="module")
def mixture(model_cache):
    config = load_config(ROOT / "configs/legal_mix_cpu.yaml")
    config.model.cache_dir = model_cache
    env = make_env(config.env)
    return config, env, config_tokenizer(config.model, env.text_corpus())


@pytest.mark.parametrize("name", ["statute", "argument", "gdpr", "lexam"])
def test_no_degenerate_policy_earns_more_than_the_bound(name, mixture):
    config, env, tokenizer = mixture
    member = env.member_envs()[name]
    cap = config.rollout.max_new_tokens
    rows = audit_env(name, member, member.tasks("test"), tokenizer, config.run.seed, cap)
    teacher, degenerate = rows[0], rows[1:]
    assert teacher.policy == TEACHER and teacher.failed == 0 and teacher.mean_reward > 0
    assert set(member.degenerate_policies()) <= {row.policy for row in degenerate}
    above = {row.policy: round(row.share, 3) for row in degenerate if row.share > SHARE_BOUND}
    assert not above, f"{name}: degenerate policies above {SHARE_BOUND:.0%} of the teacher"
    assert teacher.cut <= MAX_CUT, f"{name}: {teacher.cut:.0%} of the teacher's replies cut"


def test_the_argument_demos_teacher_fits_its_cap_and_no_rule_earns_the_bound(model_cache):
    """The demo's config on the paper's 270 held-out triples, under its token cap: every rule
    that skips a part of the task (deciding, abstaining where it must, arguing where it can,
    citing with the right side, comparing the cases) stays at or under `SHARE_BOUND` of the
    teacher's reward."""
    config = load_config(ROOT / "configs/argument_cpu.yaml")
    config.model.cache_dir = model_cache
    env = make_env(config.env)
    tokenizer = config_tokenizer(config.model, env.text_corpus())
    cap = config.rollout.max_new_tokens
    rows = audit_env("argument", env, env.tasks("test"), tokenizer, config.run.seed, cap)
    teacher, by_policy = rows[0], {row.policy: row for row in rows[1:]}
    assert teacher.policy == TEACHER and teacher.tasks == 270
    assert teacher.cut <= MAX_CUT and teacher.headline == 1.0
    skipping = {
        "cato_never_abstains",
        "always_abstain",
        "cato_analogies_only",
        "cato_abstains_on_the_rebuttal",
        "cato_decisions_citing_the_other_side",
        "cato_ids_only",
        "cato_denied",
        "never_compares",
        "outcome_only_never_compares",
    }
    assert skipping <= set(by_policy)
    shares = {policy: row.share for policy, row in by_policy.items()}
    assert max(shares.values()) <= SHARE_BOUND, shares
    assert shares["cato_never_abstains"] <= 0.1, shares
