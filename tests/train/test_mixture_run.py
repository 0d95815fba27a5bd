"""A mixture trained end to end on the tiny model: per-env metrics, each env's data position in
the checkpoint and after a resume, and one evaluation report with a section per env."""

import json

import pytest

from tests.e2e import run_lexrl

MIX = """
model:
  name_or_path: tiny
  cache_dir: {cache}
lora:
  r: 4
  alpha: 8
rollout:
  max_new_tokens: 16
grpo:
  num_generations: 2
  tasks_per_step: 3
  scale_rewards: batch
  micro_batch_size: 16
env:
  type: mix
  members:
    - env: {{type: statute, first_stage_k: 10, final_k: 3, mas_k: 6, max_iterations: 1}}
      weight: 2
    - env: {{type: argument, test_per_kind: 1}}
    - env: {{type: gdpr, system: none, eval_grid: [none], max_new_tokens: 8}}
eval:
  max_tasks: 2
logging:
  wandb_mode: disabled  # W&B's service costs each run seconds; test_cli's run checks it
run:
  output_dir: {out}
  max_steps: {steps}
  save_every: 1
  eval_before: {evals}
  eval_after: {evals}
"""
ENVS = ("statute", "argument", "gdpr")


def _config(tmp_path, name, cache, steps, evals):
    path = tmp_path / f"{name}.yaml"
    out = tmp_path / name
    path.write_text(MIX.format(cache=cache, out=out, steps=steps, evals=str(evals).lower()))
    return path, out


def _state(out, step):
    return json.loads((out / "checkpoints" / f"step-{step:06d}" / "trainer_state.json").read_text())


def _records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_mixture_trains_resumes_and_is_evaluated_per_env(lexrl_in_process, tmp_path, model_cache):
    config, out = _config(tmp_path, "straight", model_cache, steps=3, evals=True)
    result = run_lexrl("train", str(config))
    assert result.returncode == 0, result.stderr[-3000:]

    records = _records(out)
    assert [r["step"] for r in records] == [1, 2, 3]
    states = [_state(out, step) for step in (1, 2, 3)]
    for step, (record, state) in enumerate(zip(records, states, strict=True), start=1):
        positions = state["env_positions"]
        assert sum(positions.values()) == state["position"] == 3 * step
        drawn = {name: positions.get(name, 0) for name in ENVS}
        before = states[step - 2]["env_positions"] if step > 1 else {}
        for name in ENVS:
            in_step = drawn[name] - before.get(name, 0)
            # Each env that had tasks this step is logged under its name, with 2 episodes a task.
            assert (f"{name}/reward/total" in record) == (in_step > 0)
            if in_step:
                assert record[f"{name}/count/episodes"] == 2 * in_step
        assert record["count/episodes"] == 6
    assert {name for s in states for name in s["env_positions"]} == set(ENVS), (
        "three steps of three tasks drew no task of some env: change the seed of this test"
    )

    assert (out / "before_after.png").stat().st_size > 0
    summaries = json.loads((out / "eval_summary.json").read_text())
    for when in ("before", "after"):
        for name in ENVS:
            assert summaries[when][f"{name}/episodes"] == 2.0  # eval.max_tasks per env
    # Each member is paired task by task with its own best degenerate policy.
    versus = json.loads((out / "eval_vs_degenerate.json").read_text())
    assert {row["env"] for row in versus} == set(ENVS)
    assert all(row["paired_tasks"] == 2 for row in versus if row["measure"] == "reward")
    # ... and against every one of its degenerate policies, not the best alone.
    argument = next(r for r in versus if r["env"] == "argument" and r["measure"] == "reward")
    assert len(argument["each"]) > 10 and all(each["tasks"] == 2 for each in argument["each"])
    # Before and after, paired on each member's own tasks.
    changes = json.loads((out / "eval_before_after.json").read_text())
    rewards = {c["env"]: c for c in changes if c["metric"] == "reward"}
    assert set(rewards) == set(ENVS) and all(c["tasks"] == 2 for c in rewards.values())
    after = summaries["after"]["argument/reward"]
    assert rewards["argument"]["after"] == pytest.approx(after)

    # A run stopped after step 1 and resumed draws the same tasks for steps 2 and 3.
    config, resumed = _config(tmp_path, "resumed", model_cache, steps=1, evals=False)
    assert run_lexrl("train", str(config)).returncode == 0
    result = run_lexrl("train", str(config), "--run.max_steps", "3", "--run.resume", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resumed from" in result.stderr
    assert _state(resumed, 3)["env_positions"] == states[2]["env_positions"]
    for a, b in zip(_records(out)[1:], _records(resumed)[1:], strict=True):
        assert {k for k in a if k.endswith("/count/episodes")} == {
            k for k in b if k.endswith("/count/episodes")
        }

    checkpoint = out / "checkpoints" / "step-000003"
    result = lexrl_in_process("eval", str(config), "--checkpoint", str(checkpoint))
    assert result.returncode == 0, result.stderr[-3000:]
    folder = next((resumed / "eval").glob("step-000003_test_first2_*"))
    report = json.loads((folder / "eval_test_report.json").read_text())
    assert list(report["envs"]) == list(ENVS)
    for name in ENVS:
        entry = report["envs"][name]
        assert entry["tasks"] == 2 and entry["summary"]["episodes"] == 2.0
        assert entry["headline_metric"] in entry["summary"]
    markdown = (folder / "eval_test_report.md").read_text()
    assert markdown.index("## Headline") < markdown.index("## statute")
    assert "| gdpr | 2 | accuracy |" in markdown
    assert "always Yes / always B" in markdown  # the gdpr env's own part, with its baselines
