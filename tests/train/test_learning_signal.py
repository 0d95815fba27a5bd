"""A run that cannot learn says so at once: every step logs the share of groups whose rewards are
all equal, the share of replies parsed and the share of trained tokens with a non-zero
advantage; when none of the first `run.no_signal_steps` steps had a token to learn from, one
line beginning `no learning signal:` says why (or, with `run.stop_without_signal`, the run
ends with exit 9); and the end of a run says per headline whether it learned."""

import json
import math
from types import SimpleNamespace

import pytest

from lexrl.config import WarmstartConfig
from lexrl.eval.before_after import Change
from lexrl.eval.degenerate_gain import DegenerateGain
from lexrl.train.advantages import rows_from_groups
from lexrl.train.learning_signal import (
    SignalWatch,
    group_rows,
    no_signal_line,
    rewards_equal,
    verdict_line,
    verdict_lines,
)
from lexrl.train.manifest import latest_checkpoint
from lexrl.train.trainer import (
    FailedSteps,
    halt_after,
    metric_keys,
    reduce_metric_sums,
    step_metrics,
)
from lexrl.types import Group, Task, Trajectory, Turn

NAN = math.nan
ONE_PROCESS = SimpleNamespace(num_processes=1)

RUN = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 4
grpo:
  num_generations: 2
  tasks_per_step: 2
env:
  type: lexam
warmstart:
  enabled: false
logging:
  wandb_mode: disabled
run:
  output_dir: {out}
  max_steps: 4
  save_every: 10
  eval_before: false
  eval_after: false
"""
"""LEXam's MCQ on the untrained tiny model: a 4-token reply never writes a `###X###` marker, so
every reply is wrong and unparsed, and every group's rewards are equal."""


def turn(role, tokens, trainable=True):
    return Turn(role, [1, 2], list(range(tokens)), [0.0] * tokens, "", 0, trainable)


def episode(reward, role_rewards=None, failed=None, tokens=(("asker", 3), ("rater", 5))):
    return Trajectory(
        "t",
        [turn(role, count) for role, count in tokens],
        reward=reward,
        role_rewards=role_rewards or {},
        failed=failed,
        metrics={} if failed else {"parsed": float(reward > 0)},
    )


ENV = SimpleNamespace(
    name="qa",
    roles=("asker", "rater"),
    reward_components=(),
    episode_metrics=("parsed",),
    validity_metric_name=lambda: "parsed",
)


def step_means(groups):
    """A step's metrics as one process's trainer logs them."""
    rows = rows_from_groups(groups, "group", 1e-4)
    return reduce_metric_sums(step_metrics(groups, ENV, rows), metric_keys(ENV), ONE_PROCESS)


def signal(groups):
    return {key: value for key, value in step_means(groups).items() if key.startswith("signal/")}


def test_a_group_is_equal_when_its_scored_rewards_are():
    assert rewards_equal([0.5, 0.5, NAN])
    assert not rewards_equal([0.5, 0.0, NAN])
    assert rewards_equal([NAN, NAN]) is None
    assert rewards_equal([1.0])


def test_equal_groups_parsed_and_advantage_tokens_per_step_and_role():
    groups = [
        # Equal once the failed episode is left out: no token moves.
        Group(Task("a", {}, []), [episode(1.0), episode(1.0), episode(NAN, failed="judge")]),
        # The rewards differ, but the rater's own rewards are equal.
        Group(
            Task("b", {}, []),
            [episode(1.0, {"rater": 0.0}), episode(0.0, {"rater": 0.0}), episode(0.0)],
        ),
    ]
    means = signal(groups)
    assert means["signal/groups"] == 2
    assert means["signal/equal_reward_groups"] == 0.5
    assert means["signal/asker/equal_reward_groups"] == 0.5
    assert means["signal/rater/equal_reward_groups"] == 1.0
    # 5 scored episodes of 8 tokens; group b's 3 episodes have non-zero advantages.
    assert means["signal/trained_tokens"] == 40
    assert means["signal/advantage_tokens"] == 24 / 40
    assert means["signal/asker/advantage_tokens"] == 9 / 15
    assert means["signal/rater/trained_tokens"] == 25
    assert means["signal/parsed"] == 3 / 5
    assert not any(key.endswith("/reported") for key in means)


def test_an_env_without_a_validity_metric_logs_no_parsed_share():
    groups = [Group(Task("a", {}, []), [episode(1.0), episode(0.0)])]
    rows = rows_from_groups(groups, "group", 1e-4)
    env = SimpleNamespace(**{**vars(ENV), "validity_metric_name": lambda: None})
    means = reduce_metric_sums(step_metrics(groups, env, rows), metric_keys(env), ONE_PROCESS)
    assert "signal/parsed" not in means
    assert means["signal/equal_reward_groups"] == 0.0
    assert means["signal/advantage_tokens"] == 1.0


def test_rows_are_split_by_the_group_that_made_them():
    groups = [
        Group(Task("a", {}, []), [episode(1.0, tokens=(("asker", 2),)), episode(NAN, failed="x")]),
        Group(Task("b", {}, []), [Trajectory("b", [turn("asker", 2, trainable=False)])] * 2),
        Group(Task("c", {}, []), [episode(0.0), episode(1.0)]),
    ]
    rows = rows_from_groups(groups, "group", 1e-4)
    assert [len(part) for part in group_rows(groups, rows)] == [1, 0, 4]
    with pytest.raises(ValueError):
        group_rows(groups, rows[:-1])


NO_SIGNAL = {
    "signal/groups": 2.0,
    "signal/equal_reward_groups": 1.0,
    "signal/trained_tokens": 128.0,
    "signal/advantage_tokens": 0.0,
    "signal/parsed": 0.0,
}


def test_the_watcher_speaks_at_step_n_and_not_before():
    watch = SignalWatch(3, 0, None)
    assert watch.observe(1, NO_SIGNAL) is None
    assert watch.observe(2, NO_SIGNAL) is None
    line = watch.observe(3, NO_SIGNAL)
    assert line.startswith("no learning signal: in each of the first 3 steps")
    assert "(0 of 384 tokens; 6 of 6 groups had equal rewards); 0% of replies parsed" in line
    assert watch.observe(4, NO_SIGNAL) is None


def test_one_step_with_signal_silences_the_watcher():
    watch = SignalWatch(3, 0, None)
    some = {**NO_SIGNAL, "signal/equal_reward_groups": 0.5, "signal/advantage_tokens": 0.25}
    assert [watch.observe(step, m) for step, m in [(1, NO_SIGNAL), (2, some), (3, NO_SIGNAL)]] == [
        None
    ] * 3


def test_a_resumed_run_watches_only_what_is_left_and_zero_watches_nothing():
    assert all(SignalWatch(3, 3, None).observe(s, NO_SIGNAL) is None for s in range(4, 8))
    assert all(SignalWatch(0, 0, None).observe(s, NO_SIGNAL) is None for s in range(1, 5))
    resumed = SignalWatch(3, 1, None)
    assert resumed.observe(2, NO_SIGNAL) is None
    assert resumed.observe(3, NO_SIGNAL).startswith("no learning signal: in each of steps 2 to 3")


def test_the_line_names_the_warm_start_only_when_given_and_parsed_only_when_measured():
    counts = {"groups": 20, "equal": 20, "tokens": 384, "moved": 0}
    warm = no_signal_line(3, 1, counts, 0.0, WarmstartConfig(enabled=True, num_episodes=96))
    assert "20 of 20 groups had equal rewards" in warm and "0% of replies parsed" in warm
    assert "warmstart.num_episodes=96" in warm and "grpo.num_generations" in warm
    assert warm.endswith('see "Is it learning?" (docs/learning.md)')
    bare = no_signal_line(3, 1, counts, None, None)
    assert "warmstart" not in bare and "parsed" not in bare
    assert "\n" not in warm + bare
    off = no_signal_line(3, 1, counts, 0.0, WarmstartConfig(enabled=False))
    assert "not warm-started (warmstart.enabled=false)" in off
    assert "num_episodes" not in off


def test_only_a_step_without_signal_prints_the_line(tmp_path, capsys):
    run = SimpleNamespace(
        output_dir=tmp_path, main=True, config=SimpleNamespace(run=SimpleNamespace())
    )
    run.config.run.stop_without_signal = False
    equal = [Group(Task(f"{i}", {}, []), [episode(1.0), episode(1.0)]) for i in range(2)]
    differ = [Group(Task(f"{i}", {}, []), [episode(1.0), episode(0.0)]) for i in range(2)]
    printed = []
    for groups in (differ, equal):
        watch, failures = SignalWatch(1, 0, None), FailedSteps(2)
        assert halt_after(run, 1, step_means(groups), groups, failures, watch) is None
        printed.append(capsys.readouterr().err)
    assert printed[0] == ""
    assert printed[1].startswith("no learning signal: ") and printed[1].count("\n") == 1
    run.config.run.stop_without_signal = True
    halt = halt_after(run, 1, step_means(equal), equal, FailedSteps(2), SignalWatch(1, 0, None))
    assert str(halt).startswith("no learning signal: ") and halt.exit_code == 9


def change(mean, low, high, env=""):
    difference = {"mean": mean, "low": low, "high": high}
    return Change(env, "reward", 0.3, 0.3 + mean, difference, 40)


def gain(verdict_low, policy="always_yes"):
    paired = {"mean": 0.1, "low": verdict_low, "high": 0.2}
    return DegenerateGain("demoqa", "reward", 0.3, 0.5, 0.4, policy, 0.4, 0, 1.0, paired, 40)


def test_the_verdict_says_learned_only_when_the_paired_interval_is_above_zero():
    learned = verdict_line("demoqa", "reward", change(0.21, 0.12, 0.3), gain(0.05))
    assert learned == (
        "verdict: demoqa reward +0.210 (95% CI +0.120 to +0.300, paired over 40 tasks): "
        "learned; vs the best degenerate policy (always_yes): beats it: +0.100 "
        "(95% CI +0.050 to +0.200, paired over 40 tasks)"
    )
    flat = verdict_line("demoqa", "reward", change(0.05, -0.02, 0.12), gain(-0.01))
    assert ": did not learn; " in flat and "(always_yes): above it, within the 95%" in flat
    assert verdict_line("demoqa", "reward", None, None) == (
        "verdict: demoqa reward: no evaluation before training to pair with; "
        "not compared with degenerate policies"
    )


def test_one_verdict_per_env_and_measure():
    changes = [change(0.2, 0.1, 0.3, "demoqa"), change(0.0, -0.1, 0.1, "other")]
    lines = verdict_lines({"demoqa": ("reward",), "other": ("reward",)}, changes, [gain(0.05)])
    assert len(lines) == 2
    assert lines[0].startswith("verdict: demoqa reward +0.200") and "beats it" in lines[0]
    assert lines[1].startswith("verdict: other reward +0.000") and "not compared" in lines[1]


@pytest.mark.slow
def test_a_run_with_equal_rewards_everywhere_says_so_by_step_3(
    lexrl_in_process, tmp_path, model_cache
):
    out = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(RUN.format(cache=model_cache, out=out))

    warned = lexrl_in_process("train", str(config))
    assert warned.returncode == 0, warned.stderr[-3000:]
    assert warned.stderr.count("no learning signal: ") == 1
    line = next(li for li in warned.stderr.splitlines() if "no learning signal: " in li)
    assert "in each of the first 3 steps" in line and "0% of replies parsed" in line
    assert (
        warned.stderr.index("step 3:") < warned.stderr.index(line) < warned.stderr.index("step 4:")
    )
    records = [json.loads(li) for li in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["signal/equal_reward_groups"] for r in records] == [1.0] * 4
    assert [r["signal/advantage_tokens"] for r in records] == [0.0] * 4

    stopped = tmp_path / "stopped"
    halted = lexrl_in_process(
        "train",
        str(config),
        "--run.output_dir",
        str(stopped),
        "--run.stop_without_signal",
        "true",
    )
    assert halted.returncode == 9, halted.stderr[-3000:]
    last = halted.stderr.strip().splitlines()[-1]
    assert last.startswith("run error: no learning signal: in each of the first 3 steps"), last
    assert latest_checkpoint(stopped) == stopped / "checkpoints" / "step-000003"
