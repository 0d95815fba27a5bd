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
    """The demo's config on the paper's 270 held-out triples, under its 128-token cap: the
    teacher's compact JSON plies are never cut, and every rule, those that skip a part of the
    task (deciding, abstaining where it must, arguing where it can, one ply's distinction) and
    those that claim what is false or irrelevant (denied, reversed, every factor, the other
    side's), stays at or under `SHARE_BOUND` (60%) of the teacher's reward."""
    config = load_config(ROOT / "configs/argument_cpu.yaml")
    config.model.cache_dir = model_cache
    env = make_env(config.env)
    tokenizer = config_tokenizer(config.model, env.text_corpus())
    cap = config.rollout.max_new_tokens
    assert cap == 128
    rows = audit_env("argument", env, env.tasks("test"), tokenizer, config.run.seed, cap)
    teacher, by_policy = rows[0], {row.policy: row for row in rows[1:]}
    assert teacher.policy == TEACHER and teacher.tasks == 270
    assert teacher.cut == 0.0 and teacher.headline == 1.0
    assert SHARE_BOUND == 0.6
    # The kinds of rule by name, so that none is dropped from the audit unnoticed.
    named = {
        "always_abstain",
        "cato_never_abstains",
        "cato_abstains_on_the_rebuttal",
        "cato_analogies_only",
        "cato_skips_the_defendants_distinction",
        "cato_skips_the_rebuttals_distinction",
        "cato_distinguishes_by_the_precedent_only",
        "cato_asserted_and_denied",
        "cato_reversed_distinctions",
        "cato_with_every_factor_claimed",
        "cato_decisions_claiming_the_other_side",
        "claim_every_factor",
        "always_argue_claiming_everything",
        "rule_claiming_everything",
        "never_compares",
        "outcome_only_never_compares",
    }
    assert named | set(env.degenerate_policies()) <= set(by_policy)
    shares = {policy: round(row.share, 3) for policy, row in by_policy.items()}
    above = {policy: share for policy, share in shares.items() if share > SHARE_BOUND}
    assert not above, f"above {SHARE_BOUND:.0%} of the teacher: {above}"
