"""`lexrl audit`: degenerate policies' rewards as shares of the scripted teacher's, the table that
marks the large ones, and the command on the CPU mixture."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from lexrl.envs.debate.env import DebateEnv
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.eval.audit import TEACHER, AuditRow, audit, audit_env, markdown

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
    assert always_a.mean_reward == pytest.approx(right + 0.2)
    assert always_a.share == pytest.approx((right + 0.2) / 1.2)
    assert always_a.headline == pytest.approx(right)
    assert rows["empty"].mean_reward == 0.0
    assert set(rows) == {TEACHER, *env.degenerate_policies()}


def test_an_env_without_a_teacher_gets_rewards_but_no_shares(tokenizer):
    env = DebateEnv(DebateEnvConfig())
    rows = audit(env, tokenizer, max_tasks=3)
    assert rows[0].policy == TEACHER and rows[0].mean_reward is None and rows[0].note
    assert all(row.share is None and row.mean_reward is not None for row in rows[1:])
    assert "n/a (no teacher)" in markdown(rows)


def test_the_table_marks_shares_above_the_bound():
    rows = [
        AuditRow("argument", TEACHER, 3, 0, 2.0, None, 1.0, "accuracy"),
        AuditRow("argument", "always_abstain", 3, 0, 1.6, 0.8, 1.0, "accuracy"),
        AuditRow("argument", "empty", 3, 1, 1.0, 0.5, None, "accuracy"),
    ]
    lines = markdown(rows).splitlines()
    assert "| argument | always_abstain | 3 | 0 | 1.600 | **80%** ⚠ | accuracy 1.000 |" in lines
    assert "| argument | empty | 3 | 1 | 1.000 | 50% | accuracy n/a |" in lines
    assert "| argument | teacher | 3 | 0 | 2.000 | 100% | accuracy 1.000 |" in lines


def test_the_command_audits_every_member_of_the_cpu_mixture(model_cache):
    command = [sys.executable, "-m", "lexrl.cli", "audit", "configs/legal_mix_cpu.yaml"]
    options = ["--max-tasks", "2", "--json", "--model.cache_dir", model_cache]
    done = subprocess.run(
        command + options, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    *table, rows_json = done.stdout.strip().splitlines()
    rows = json.loads(rows_json)
    envs = ("statute", "argument", "gdpr", "lexam")
    assert [row["env"] for row in rows if row["policy"] == TEACHER] == list(envs)
    for row in rows:
        assert f"| {row['env']} | {row['policy']} | 2 |" in "\n".join(table)
        assert row["tasks"] == 2 and row["failed"] == 0
    assert {"always_abstain", "majority_label", "exit_at_once"} <= {row["policy"] for row in rows}


def test_the_command_rejects_a_max_tasks_below_one():
    command = [sys.executable, "-m", "lexrl.cli", "audit", "configs/legal_mix_cpu.yaml"]
    done = subprocess.run(
        [*command, "--max-tasks", "0"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1].startswith("config error: --max-tasks 0")


def test_lexrl_eval_shows_each_envs_degenerate_baselines(model_cache, tmp_path):
    command = [sys.executable, "-m", "lexrl.cli", "eval", "configs/legal_mix_cpu.yaml"]
    options = [
        "--eval.policy", "false", "--eval.max_tasks", "4",
        "--model.cache_dir", model_cache, "--run.output_dir", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(
        command + options, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (report_file,) = tmp_path.glob("eval/*/eval_test_report.json")
    report = json.loads(report_file.read_text())
    for name in ("statute", "argument", "gdpr", "lexam"):
        rows = report["envs"][name]["degenerate_baselines"]
        assert rows[0]["policy"] == TEACHER and rows[0]["env"] == name
        assert {"empty", "echo"} <= {row["policy"] for row in rows}
    markdown_text = report_file.with_suffix(".md").read_text()
    for name in ("statute", "argument", "gdpr", "lexam"):
        section = markdown_text.split(f"\n## {name}\n")[1].split("\n## lexam\n")[0]
        assert "### Degenerate baselines" in section and f"| {name} | empty |" in section
