"""`lexrl audit`: degenerate policies' rewards as shares of the scripted teacher's, the table that
marks the large ones, and the command on the CPU mixture."""

import dataclasses
import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from lexrl.envs.argument.env import ArgumentEnv
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.base import Env
from lexrl.envs.debate.env import DebateEnv
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.gdpr.env import GdprEnv
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.eval.audit import (
    TEACHER,
    AuditRow,
    audit,
    audit_env,
    audited_policies,
    markdown,
    play,
    set_shares,
    teachable,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_path):
    return AutoTokenizer.from_pretrained(tiny_model_path)


def test_shares_are_of_the_teachers_mean_reward(tokenizer):
    env = LexamEnv(LexamEnvConfig(format_weight=0.2))
    tasks = env.tasks("test")[:8]
    rows = {row.policy: row for row in audit_env("lexam", env, tasks, tokenizer)}
    teacher = rows[TEACHER]
    assert (teacher.mean_reward, teacher.share, teacher.headline) == (1.2, None, 1.0)
    right = sum(task.gold == 0 for task in tasks) / len(tasks)
    always_a = rows["always_A"]
    # The format credit is chance-normalised: +1 right, -1/3 wrong (4 options).
    earned = right + 0.2 * (right - (1 - right) / 3)
    assert always_a.mean_reward == pytest.approx(earned)
    assert always_a.share == pytest.approx(earned / 1.2)
    assert always_a.headline == pytest.approx(right)
    assert rows["empty"].mean_reward <= 0.0
    assert set(rows) == {TEACHER, *audited_policies(env, tasks, 0)[0]}


class NoTeacher(DebateEnv):
    """The debate env as it was before it had a scripted teacher."""

    def teacher(self, task, rng):
        return Env.teacher(self, task, rng)


def test_an_env_without_a_teacher_gets_rewards_but_no_shares(tokenizer):
    env = NoTeacher(DebateEnvConfig())
    rows = audit(env, tokenizer, max_tasks=3)
    assert rows[0].policy == TEACHER and rows[0].mean_reward is None and rows[0].note
    assert all(row.share is None and row.mean_reward is not None for row in rows[1:])
    assert "n/a (no teacher)" in markdown(rows)


def test_policies_are_set_against_the_teacher_on_the_tasks_it_plays(tokenizer):
    env = GdprEnv(GdprEnvConfig(eval_grid=["none", "live"]))
    tasks = env.tasks("test")[:8]
    systems = [task.meta["system"] for task in tasks]
    assert "live" in systems and "none" in systems
    rows = audit_env("gdpr", env, tasks, tokenizer)
    played = len(teachable(env, tasks))
    assert played == systems.count("none")
    assert rows[0].note == (
        f"plays {played} of 8 tasks; every row is on those; "
        "left out, the env has one role: other_role_teacher"
    )
    assert all(row.tasks == played and row.share is not None for row in rows[1:])


def test_the_table_marks_shares_above_the_bound():
    rows = [
        AuditRow("argument", TEACHER, 3, 0, 2.0, None, 1.0, "accuracy"),
        AuditRow("argument", "always_abstain", 3, 0, 1.6, 0.8, 1.0, "accuracy"),
        AuditRow("argument", "empty", 3, 1, 1.0, 0.5, None, "accuracy"),
    ]
    rows[0].cut = 0.25
    lines = markdown(rows).splitlines()
    assert (
        "| argument | always_abstain | 3 | 0 | 1.600 | **80%** ⚠ | accuracy 1.000 | n/a |" in lines
    )
    assert "| argument | empty | 3 | 1 | 1.000 | 50% | accuracy n/a | n/a |" in lines
    assert "| argument | teacher | 3 | 0 | 2.000 | 100% | accuracy 1.000 | 25% |" in lines


def test_no_share_is_taken_of_a_teacher_reward_that_is_not_positive():
    """A teacher at -0.03 once put a policy at +1.01 at -3367% of it: a ratio to a reward <= 0
    is no share, so it is n/a in the table and null in the JSON."""
    rows = [
        AuditRow("gdpr", TEACHER, 4, 0, -0.03, None, 0.5, "accuracy"),
        AuditRow("gdpr", "always_Yes", 4, 0, 1.01, -33.67, 0.5, "accuracy"),
        AuditRow("lexam", TEACHER, 4, 0, 0.0, None, 0.0, "accuracy"),
        AuditRow("lexam", "empty", 4, 0, -0.5, None, 0.0, "accuracy"),
        AuditRow("argument", TEACHER, 4, 0, 2.0, None, 1.0, "accuracy"),
        AuditRow("argument", "empty", 4, 0, 0.5, None, 0.0, "accuracy"),
    ]
    table = markdown(rows)
    # Even a row whose share was set elsewhere shows none.
    assert "| gdpr | always_Yes | 4 | 0 | 1.010 | n/a (teacher's reward <= 0) |" in table
    assert "| gdpr | teacher | 4 | 0 | -0.030 | n/a (teacher's reward <= 0) |" in table
    assert "| lexam | empty | 4 | 0 | -0.500 | n/a (teacher's reward <= 0) |" in table
    assert "| argument | empty | 4 | 0 | 0.500 | 25% |" in table
    assert "-3367%" not in table
    shares = {(row.env, row.policy): row.share for row in set_shares(rows)}
    assert shares[("gdpr", "always_Yes")] is None and shares[("lexam", "empty")] is None
    assert shares[("argument", "empty")] == 0.25
    assert json.loads(json.dumps([dataclasses.asdict(row) for row in rows]))[1]["share"] is None


def test_the_cap_cuts_replies_as_a_rollout_would_and_the_row_says_how_many(tokenizer):
    env = ArgumentEnv(ArgumentEnvConfig(workflow="MA", train_per_kind=3, test_per_kind=6))
    tasks = env.tasks("test")
    whole = {row.policy: row for row in audit_env("argument", env, tasks, tokenizer, 0, 1024)}
    cut = {row.policy: row for row in audit_env("argument", env, tasks, tokenizer, 0, 12)}
    assert whole[TEACHER].cut == 0.0 and whole[TEACHER].share is None
    # 12 tokens hold no whole JSON ply: every teacher reply is cut and earns nothing, and a cut
    # reply is no abstention, so the two kinds of triple that must abstain (two thirds of them)
    # pay the failed-abstention penalty on every ply.
    penalty = env.config.failed_abstention_penalty
    assert cut[TEACHER].cut == 1.0
    assert cut[TEACHER].mean_reward == pytest.approx(-penalty * 2 / 3)
    assert whole["empty"].cut == 0.0 and cut["echo"].cut == 1.0
    with pytest.raises(ValueError, match="tokenizer"):
        audit_env("argument", env, tasks, None, 0, 1024)


def test_a_random_policy_is_averaged_over_seeds(tokenizer):
    env = LexamEnv(LexamEnvConfig())
    tasks = env.tasks("test")[:6]
    (row,) = [r for r in audit_env("lexam", env, tasks, tokenizer) if r.policy == "random_letter"]
    assert row.tasks == 6 and row.note == "mean of 3 seeds"
    factory = env.degenerate_policies()["random_letter"]
    plays = [play(env, tasks, tokenizer, factory, seed) for seed in range(3)]
    rewards = [t.reward for trajectories in plays for t in trajectories]
    assert row.mean_reward == pytest.approx(sum(rewards) / len(rewards))
    assert len({tuple(t.reward for t in trajectories) for trajectories in plays}) > 1
    # Each task's value is its mean over the seeds: what a trained policy is paired with.
    for index, task in enumerate(tasks):
        seen = [trajectories[index] for trajectories in plays]
        assert {t.task_id for t in seen} == {task.id}
        assert row.task_values[task.id]["reward"] == pytest.approx(sum(t.reward for t in seen) / 3)
        assert row.task_values[task.id]["accuracy"] == pytest.approx(
            sum(t.metrics["accuracy"] for t in seen) / 3
        )
    assert "task_values" not in row.as_json() and row.as_json()["policy"] == "random_letter"


def test_the_command_audits_every_member_of_the_cpu_mixture(lexrl_in_process, model_cache):
    options = ["--max-tasks", "2", "--json", "--model.cache_dir", model_cache]
    done = lexrl_in_process("audit", str(ROOT / "configs/legal_mix_cpu.yaml"), *options)
    assert done.returncode == 0, done.stderr
    *table, rows_json = done.stdout.strip().splitlines()
    rows = json.loads(rows_json)
    envs = ("statute", "argument", "gdpr", "lexam")
    assert [row["env"] for row in rows if row["policy"] == TEACHER] == list(envs)
    for row in rows:
        policy = f"{row['policy']} ({row['note']})" if row["note"] else row["policy"]
        assert f"| {row['env']} | {policy} | 2 |" in "\n".join(table)
        assert row["tasks"] == 2 and row["failed"] == 0
    assert {"always_abstain", "majority_label", "exit_at_once"} <= {row["policy"] for row in rows}


def test_the_command_rejects_a_max_tasks_below_one(lexrl_in_process):
    done = lexrl_in_process("audit", str(ROOT / "configs/legal_mix_cpu.yaml"), "--max-tasks", "0")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("config error: --max-tasks 0")


def test_lexrl_eval_shows_each_envs_degenerate_baselines(lexrl_in_process, model_cache, tmp_path):
    options = [
        "--eval.policy", "false", "--eval.max_tasks", "4",
        "--model.cache_dir", model_cache, "--run.output_dir", str(tmp_path),
    ]  # fmt: skip
    done = lexrl_in_process("eval", str(ROOT / "configs/legal_mix_cpu.yaml"), *options)
    assert done.returncode == 0, done.stderr[-3000:]
    (report_file,) = tmp_path.glob("eval/*/eval_test_report.json")
    report = json.loads(report_file.read_text())
    for name in ("statute", "argument", "gdpr", "lexam"):
        rows = report["envs"][name]["degenerate_baselines"]
        assert rows[0]["policy"] == TEACHER and rows[0]["env"] == name
        assert {"empty", "echo"} <= {row["policy"] for row in rows}
    # Each env's folder holds its part of the report, and nothing is left empty.
    for name in ("statute", "argument", "gdpr", "lexam"):
        part = json.loads((report_file.parent / name / "eval_test_report.json").read_text())
        assert part["env_name"] == name and part["degenerate_baselines"]
    assert all(any(folder.iterdir()) for folder in report_file.parent.iterdir() if folder.is_dir())
    assert "provenance" in report and (report_file.parent / "eval_test_headline.png").is_file()
    markdown_text = report_file.with_suffix(".md").read_text()
    for name in ("statute", "argument", "gdpr", "lexam"):
        section = markdown_text.split(f"\n## {name}\n")[1].split("\n## lexam\n")[0]
        assert "### Degenerate baselines" in section and f"| {name} | empty |" in section
