"""scripts/demo_table.py on two runs of the argument demo shrunk to 9 held-out triples, whose
evaluations are played here by scripted policies: before, one that always abstains; after, the
env's teacher (every decision right). The table pairs them and audits the degenerate policies."""

from __future__ import annotations

import random

import pytest
import yaml

from tests.scripts import ROOT, run_script, table_rows

pytestmark = pytest.mark.slow


def write_config(path, model_cache) -> None:
    config = yaml.safe_load((ROOT / "configs" / "argument_cpu.yaml").read_text())
    config["model"]["cache_dir"] = model_cache
    config["env"].update(
        train_per_kind=2,
        test_per_kind=3,
        prompts_dir=str(ROOT / "configs" / "argument_cpu_prompts"),
    )
    config["warmstart"]["enabled"] = False
    path.write_text(yaml.safe_dump(config))


def write_evaluations(config_path, runs) -> None:
    """`eval_before.jsonl` (always abstain) and `eval_after.jsonl` (the teacher) of each run,
    as `lexrl train` writes them."""
    from lexrl.config import load_config
    from lexrl.envs import make_env
    from lexrl.envs.degenerate import ProbePolicy
    from lexrl.eval.evaluate import eval_tasks, write_groups
    from lexrl.models import config_tokenizer
    from lexrl.rollout.engine import run_groups

    config = load_config(str(config_path))
    env = make_env(config.env)
    tokenizer = config_tokenizer(config.model, env.text_corpus())
    tasks = eval_tasks(env, config)
    policies = {"before": env.degenerate_policies()["always_abstain"], "after": env.teacher}
    for seed, run in enumerate(runs):
        run.mkdir()
        for when, factory in policies.items():
            rng = random.Random(seed)
            groups = run_groups(
                env,
                tasks,
                1,
                lambda task, f=factory, r=rng: ProbePolicy(tokenizer, task.id, f(task, r), None),
                progress=False,
            )
            write_groups(groups, run / f"eval_{when}.jsonl")


def test_the_table_pairs_each_run_and_audits_the_degenerate_policies(tmp_path, model_cache):
    config = tmp_path / "argument.yaml"
    write_config(config, model_cache)
    runs = [tmp_path / "arg_s0", tmp_path / "arg_s1"]
    write_evaluations(config, runs)

    result = run_script("demo_table.py", str(config), *map(str, runs))
    out = result.stdout
    header, *rows = table_rows(out.split("\n\n")[0])
    assert header[:2] == ["run", "reward"] and header[-2:] == [
        "beats each degenerate policy (reward)",
        "(task_score)",
    ]
    assert [row[0] for row in rows] == ["arg_s0", "arg_s1"]
    for row in rows:
        assert len(row) == len(header)
        # Always abstaining is right on the triples that call for it alone; the teacher on all.
        # No triple is argued before, so none has a distinction to score on both sides.
        assert row[3] == "-"
        arguable, mismatched, non_arguable = row[4:7]
        assert arguable.startswith("0.000 -> 1.000 (+1.000")
        assert mismatched.startswith("1.000 -> 1.000 (+0.000")
        assert non_arguable.startswith("1.000 -> 1.000 (+0.000")
        # Before, no triple is argued; after, the arguable ones alone.
        assert row[7].startswith("+0.000 -> +1.000 (+1.000")
        beaten, of = row[8].split(" of ")
        assert 0 < int(beaten) <= int(of)

    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| degenerate policy"))
    end = lines.index("", start)
    policies = table_rows("\n".join(lines[start:end]))
    assert policies[0] == ["degenerate policy", "its reward", "arg_s0", "arg_s1"]
    names = [row[0].strip("`") for row in policies[1:]]
    assert "always_abstain" in names and "never_abstain_claiming_nothing" in names
    assert out.rstrip().endswith("paired over triples.")
