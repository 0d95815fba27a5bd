"""A run whose judge is down from the first step to the last must not look healthy: each step's
line shows its failed episodes and no reward (a mean over no scored episode is left out, never
written as 0), and after `run.max_failed_steps` such steps the run writes its checkpoint and ends
with exit code 9 and one line naming the judge's URL and why it failed."""

import json

import pytest

from lexrl.cli import main
from lexrl.train.manifest import latest_checkpoint
from lexrl.train.trainer import FailedSteps, metric_means
from tests.chat_stub import chat_server

RUN = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 8
grpo:
  num_generations: 2
  tasks_per_step: 2
env:
  type: lexam
  config: open_question
  judge_cache_dir: {out}/judge_cache
  judges:
    - base_url: {url}
      model: judge
      max_retries: 0
      max_parse_retries: 0
logging:
  wandb_mode: disabled
run:
  output_dir: {out}
  max_steps: 4
  save_every: 10
  max_failed_steps: 2
  eval_before: false
  eval_after: false
"""


@pytest.fixture()
def broken_judge():
    """An OpenAI-compatible judge that answers every request with a 500."""
    with chat_server(lambda headers: (500, b'{"error": {"message": "judge overloaded"}}')) as url:
        yield url


def test_a_mean_over_no_scored_episode_is_left_out_not_zero():
    totals = {
        "count/episodes": 4.0,
        "count/groups": 0.0,
        "judge/failed": 4.0,
        "reward/total": 0.0,
        "reward/group_std": 0.0,
        "env/score": 0.0,
        "env/score/reported": 0.0,
        "agent/examinee/turns": 4.0,
        "agent/examinee/tokens": 32.0,
        "agent/examinee/reward": 0.0,
        "agent/examinee/rewarded": 0.0,
    }
    assert metric_means(totals) == {
        "count/episodes": 4.0,
        "judge/failed": 4.0,
        "agent/examinee/turns": 1.0,
        "agent/examinee/tokens": 8.0,
    }


def test_an_env_metric_is_averaged_over_the_episodes_that_report_it():
    from types import SimpleNamespace

    from lexrl.train.trainer import metric_keys, reduce_metric_sums, step_metrics
    from lexrl.types import Group, Task, Trajectory

    def episode(kind, right):
        metrics = {"right_decision": right, f"right_decision_{kind}": right}
        return Trajectory(kind, [], reward=right, metrics=metrics)

    groups = [
        Group(Task("a", {}, []), [episode("arguable", 1.0), episode("arguable", 0.0)]),
        Group(Task("m", {}, []), [episode("mismatched", 1.0), episode("mismatched", 1.0)]),
    ]
    env = SimpleNamespace(
        name="argument",
        roles=(),
        reward_components=(),
        episode_metrics=("right_decision", "right_decision_arguable", "right_decision_mismatched"),
    )
    one_process = SimpleNamespace(num_processes=1)
    means = reduce_metric_sums(step_metrics(groups, env), metric_keys(env), one_process)
    assert means["env/right_decision"] == 0.75 and means["reward/total"] == 0.75
    # Averaged over all four episodes these would read 0.25 and 0.5.
    assert means["env/right_decision_arguable"] == 0.5
    assert means["env/right_decision_mismatched"] == 1.0
    assert not any(key.endswith("/reported") for key in means)


def test_only_consecutive_steps_with_every_episode_failed_halt_the_run():
    failures = FailedSteps(2)
    all_failed = {"count/episodes": 4.0, "judge/failed": 4.0}
    assert not failures.halts_after(all_failed, [])
    assert not failures.halts_after({"count/episodes": 4.0, "judge/failed": 3.0}, [])
    assert not failures.halts_after(all_failed, [])
    assert failures.halts_after(all_failed, [])
    never = FailedSteps(0)
    assert not any(never.halts_after(all_failed, []) for _ in range(5))


def test_a_run_whose_judge_is_down_halts_naming_the_judge(
    broken_judge, tmp_path, model_cache, capfd
):
    out = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(RUN.format(cache=model_cache, out=out, url=broken_judge))

    with pytest.raises(SystemExit) as exit_:
        main(["train", str(config)])

    stderr = capfd.readouterr().err
    assert exit_.value.code == 9, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("run error: 4 of 4 episodes failed in each of the last 2 steps"), last
    assert f"{broken_judge}: InternalServerError: Error code: 500" in last, last
    assert "--run.resume true" in last
    assert "step 2: reward/total=n/a" in stderr and "failed=4/4" in stderr
    assert latest_checkpoint(out) == out / "checkpoints" / "step-000002"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2], "the run stopped after two failed steps"
    for record in records:
        assert record["judge/failed"] == record["count/episodes"] == 4
        assert not any(key.startswith("reward/") for key in record), record
