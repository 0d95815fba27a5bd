import hashlib
import io
import json
from pathlib import Path

import pytest
from PIL import Image
from rich.console import Console
from tqdm import tqdm

from lexrl.config import Config
from lexrl.envs.base import EnvPart, EnvReport
from lexrl.envs.mixture import MixtureEnv
from lexrl.eval.evaluate import evaluation_report, print_summary, summarize, summary_intervals
from lexrl.rollout.engine import close_bar
from lexrl.types import Group, Task, Trajectory
from tests.chat_stub import chat_server, completion
from tests.eval.test_eval_failures import folder, run_eval


def group(task_id, rewards, failed=()):
    return Group(
        Task(task_id, {}, None),
        [
            Trajectory(
                task_id, reward=r, metrics={"accuracy": r}, failed="judge" if i in failed else None
            )
            for i, r in enumerate(rewards)
        ],
    )


def test_intervals_resample_tasks_and_leave_failed_episodes_out():
    groups = [
        group("a", [1.0, 1.0, 0.0], failed=(2,)),
        group("b", [0.0, 0.0]),
        group("c", [1.0, 0.0]),
    ]
    intervals = summary_intervals(groups)
    assert intervals["accuracy"]["mean"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert 0.0 <= intervals["accuracy"]["low"] < intervals["accuracy"]["mean"]
    assert intervals["accuracy"]["mean"] < intervals["accuracy"]["high"] <= 1.0
    summary = summarize(groups)
    assert summary["failed_episodes"] == 1 and summary["reward"] == pytest.approx(3 / 6)


def test_a_metric_is_averaged_over_the_episodes_that_report_it():
    """One evaluation may mix systems: the debate env's single-agent episodes have no
    debaters, so `x_accuracy` is the mean over the debate episodes, not diluted by zeros."""
    debate = Trajectory("d", reward=1.0, metrics={"accuracy": 1.0, "x_accuracy": 0.5})
    single = Trajectory("s", reward=0.0, metrics={"accuracy": 0.0})
    groups = [Group(Task("d", {}, None), [debate]), Group(Task("s", {}, None), [single])]
    summary = summarize(groups)
    assert summary["accuracy"] == 0.5 and summary["x_accuracy"] == 0.5
    assert summary_intervals(groups)["x_accuracy"]["mean"] == 0.5


def test_reward_components_get_intervals_over_task_means():
    first = Trajectory("a", reward=1.0, components={"format": 1.0})
    second = Trajectory("a", reward=0.0, components={"format": 0.0})
    third = Trajectory("b", reward=1.0, components={"format": 1.0})
    groups = [Group(Task("a", {}, None), [first, second]), Group(Task("b", {}, None), [third])]
    intervals = summary_intervals(groups)
    assert intervals["format"]["mean"] == pytest.approx((0.5 + 1.0) / 2)
    assert intervals["format"]["low"] == 0.5 and intervals["format"]["high"] == 1.0


def test_the_table_shows_each_mean_with_its_interval():
    groups = [group("a", [1.0]), group("b", [0.0])]
    out = io.StringIO()
    print_summary(
        {"after": summarize(groups)},
        Console(file=out, width=200),
        {"after": summary_intervals(groups)},
    )
    assert "0.5000 [0.000, 1.000]" in out.getvalue()


def lexam_eval(tmp_path: Path, url: str) -> Path:
    """`lexrl eval` of the lexam CPU config on 6 tasks against the chat endpoint at `url`; the
    evaluation's folder."""
    assert run_eval(url, tmp_path) == 0
    return folder(tmp_path)


def test_a_report_says_where_its_numbers_came_from_and_has_its_figure(tmp_path):
    with chat_server(lambda headers: (200, completion("###B###"))) as url:
        folder = lexam_eval(tmp_path, url)
    report = json.loads((folder / "eval_test_report.json").read_text())
    block = report["provenance"]
    assert list(block) == [
        "lexrl", "config_sha256", "env_packages", "policy", "sampling", "caps", "prompts",
        "seeds", "checkpoint", "libraries", "machine", "config",
    ]  # fmt: skip
    assert block["env_packages"]["lexam"]["distribution"] == "lexrl"
    canonical = json.dumps(block["config"], sort_keys=True, separators=(",", ":"))
    assert block["config_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert block["config"]["eval"]["max_tasks"] == 6
    assert block["policy"] == {"backend": "openai", "model": "vendor/stub-4o", "endpoint": url}
    assert block["sampling"]["samples_per_task"] == block["config"]["eval"]["samples_per_task"]
    assert block["caps"]["rollout.max_new_tokens"] == block["config"]["rollout"]["max_new_tokens"]
    assert set(block["libraries"]) == {
        "torch",
        "transformers",
        "peft",
        "accelerate",
        "vllm",
        "openai",
    }
    assert {"platform", "python", "cpu", "cores", "gpu"} == set(block["machine"])
    markdown = (folder / "eval_test_report.md").read_text()
    section = markdown.split("\n## Provenance\n")[1]
    assert f"config_sha256: {block['config_sha256']}" in section
    assert "max_failed_share" not in section  # the config itself stays in the JSON
    # The figure: the policy's headline metric beside the degenerate policies'.
    assert report["figure"] == "eval_test_headline.png"
    figure = folder / report["figure"]
    assert figure.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(figure).width > Image.open(figure).height
    assert f"]({report['figure']})" in markdown
    assert sorted(path.name for path in folder.iterdir() if path.is_dir()) == []
    # The policy paired task by task with the best degenerate policy on the same 6 tasks.
    reward, accuracy = report["vs_degenerate"]
    assert (reward["measure"], accuracy["measure"]) == ("reward", "accuracy")
    assert reward["paired_tasks"] == accuracy["paired_tasks"] == 6
    assert reward["paired"]["mean"] == pytest.approx(reward["gain"])
    assert "## Against the best degenerate policy" in markdown


class Member:
    headline_metric = "reward"

    def __init__(self, name: str, report: EnvReport | None):
        self.name, self.own = name, report

    def report(self, tasks, groups, request):
        return self.own


class Mixture(MixtureEnv):
    """Two member envs, `a` with a report of its own and `b` without, each with its tasks."""

    def __init__(self):
        self.members = {
            "a": Member("a", EnvReport({"x": 1}, "a's own part\n")),
            "b": Member("b", None),
        }

    def parts(self, tasks, groups):
        def own(items, name):
            return [item for item in items if (getattr(item, "task", item)).id.startswith(name)]

        return [
            EnvPart(name, env, own(tasks, name), None if groups is None else own(groups, name))
            for name, env in self.members.items()
        ]


def test_a_mixtures_env_folders_each_hold_that_envs_parts_or_do_not_exist(tmp_path):
    tasks = [Task("a1", {}, None), Task("b1", {}, None)]
    config = Config()
    config.eval.degenerate_baselines = False
    console = Console(file=io.StringIO(), width=200)
    # Baselines only: `a` has a part of its own, `b` none, so no folder.
    evaluation_report(Mixture(), tasks, None, config, "base", tmp_path / "baselines", console)
    assert sorted(p.name for p in (tmp_path / "baselines").iterdir() if p.is_dir()) == ["a"]
    part = json.loads((tmp_path / "baselines" / "a" / "eval_test_report.json").read_text())
    assert (part["env_name"], part["env"]) == ("a", {"x": 1})
    assert "a's own part" in (tmp_path / "baselines" / "a" / "eval_test_report.md").read_text()
    # With the policy's episodes every env has its means and its tasks.
    groups = [group("a1", [1.0]), group("b1", [0.0, 1.0])]
    evaluation_report(Mixture(), tasks, groups, config, "base", tmp_path / "policy", console)
    for name, episodes in (("a", 1), ("b", 2)):
        folder = tmp_path / "policy" / name
        assert sorted(p.name for p in folder.iterdir()) == [
            "eval_test.jsonl", "eval_test_report.json", "eval_test_report.md",
        ]  # fmt: skip
        part = json.loads((folder / "eval_test_report.json").read_text())
        assert part["summary"]["episodes"] == episodes
        lines = (folder / "eval_test.jsonl").read_text().splitlines()
        assert [json.loads(line)["task"]["id"] for line in lines] == [f"{name}1"]


def test_a_finished_progress_bar_in_a_log_ends_its_line():
    """On a terminal tqdm wipes the bar; in a file `\\r` wipes nothing, so without the newline
    the next table's title would land on the bar's last state."""
    log = io.StringIO()
    bar = tqdm(total=2, file=log, leave=False, desc="eval test")
    bar.update(2)
    close_bar(bar)
    assert log.getvalue().endswith("\r\n")
    quiet = io.StringIO()
    close_bar(tqdm(total=2, file=quiet, disable=True))
    assert quiet.getvalue() == ""
