"""Can a model of this size learn one ply of the argument demo at all? (issue 49, item 6)

    OMP_NUM_THREADS=1 python scripts/abstention_probe.py configs/argument_cpu.yaml \
        --layers 2 --hidden 128 --episodes 12000 --ply 2 --ply-only [--env.train_per_kind ...]

Reads ply `--ply`'s decision (abstain or argue) from the model's own greedy reply on each
held-out triple, the earlier plies the teacher's: up to `{"abstain":` (the teacher's compact
JSON), its `<think>` block included under `--reasoning checklist` (its own, never the
teacher's), then whether the flag it writes is `true`. Prints the right-decision rate per kind of triple, the separation
`argues_arguable - argues_non_arguable`, and, on the arguable triples, the ply's mean
`argument_quality` and the share of its citations of a factor the case lacks. Ply 1's decision is
the one the factors alone make; ply 2 (the defendant's) reads the other side's rows.

With `--warm PATH` it reads a built warm-start (`.lexrl_cache/tiny-…-warm-…`) and trains
nothing. Otherwise it builds the tiny model at `--layers` x `--hidden` and fine-tunes it as the
warm-start does (`lexrl.train.warmstart.supervised_finetune`) on `--episodes` scripted
episodes, optionally on each reply only up to its decision and a few tokens after it
(`--decision-only`), which isolates whether the model can compute the decision from whether
the rest of the reply drowns its one token. Each variant costs minutes, the full demo hours.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import time
from collections import defaultdict
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from lexrl.config import load_config
from lexrl.envs import make_env
from lexrl.envs.argument.grounding import argument_quality
from lexrl.envs.argument.parsing import parse_ply
from lexrl.envs.base import Env
from lexrl.models import load_base, tiny_model_dir
from lexrl.policy import ScriptedPolicy
from lexrl.train.advantages import Row
from lexrl.train.warmstart import supervised_finetune
from lexrl.types import Task

MARKER = '{"abstain":'
"""The start of a ply as the teacher writes it (compact JSON, the decision first)."""
Probe = tuple[Task, int, Row]
"""A teacher turn: its triple, its ply (0, 1, 2) and its row."""


def teacher_rows(
    env: Env, tokenizer: PreTrainedTokenizerBase, tasks: list[Task], seed: int
) -> list[Probe]:
    """Each trainable turn of the teacher's MA episodes on `tasks` (one a ply, in order)."""
    rng = random.Random(seed)

    async def play():
        out = []
        for task in tasks:
            policy = ScriptedPolicy(tokenizer, task.id, env.teacher(task, rng))
            out.append((task, await env.run_episode(task, policy)))
        return out

    rows = []
    for task, trajectory in asyncio.run(play()):
        turns = [turn for turn in trajectory.turns if turn.trainable]
        for index, turn in enumerate(turns):
            row = Row(turn.prompt_ids, turn.completion_ids, turn.logprobs, 1.0, 1.0, 0, turn.role)
            rows.append((task, index, row))
    return rows


def decision_index(tokenizer: PreTrainedTokenizerBase, completion_ids: list[int]) -> int | None:
    """How many completion tokens precede the decision's first token (after any `<think>`
    block); None when the reply has no decision."""
    for i in range(len(completion_ids) + 1):
        if tokenizer.decode(completion_ids[:i]).endswith(MARKER):
            return i
    return None


def truncated(row: Row, tokenizer: PreTrainedTokenizerBase, extra: int) -> Row:
    i = decision_index(tokenizer, row.completion_ids)
    if i is None:
        return row
    keep = i + 1 + extra
    return dataclasses.replace(
        row,
        completion_ids=row.completion_ids[:keep],
        sampler_logprobs=row.sampler_logprobs[:keep],
    )


@torch.no_grad()
def read_ply(
    env: Env,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    probes: list[Probe],
    ply: int,
    max_new_tokens: int,
) -> dict[str, float]:
    """Ply `ply`'s decision per kind, read from the model's own greedy reply up to the
    decision's first token (its own `<think>` block included, never the teacher's); the
    separation `argues_arguable - argues_non_arguable`; and on arguable triples the mean
    `argument_quality` of the parsed reply and its citations of factors their case lacks."""
    right, argues = defaultdict(list), defaultdict(list)
    quality, lacking, cited = [], 0, 0
    model.eval()
    for task, index, row in probes:
        if index != ply:
            continue
        kind = task.gold["kind"]
        gold_abstains = f"{MARKER}true" in tokenizer.decode(row.completion_ids)
        output = model.generate(
            torch.tensor([row.prompt_ids]), max_new_tokens=max_new_tokens, do_sample=False
        )[0, len(row.prompt_ids) :]
        reply = tokenizer.decode(output, skip_special_tokens=True)
        _, marker, decision = reply.partition(MARKER)
        abstains = not marker or decision.lstrip().startswith("true")
        right[f"right_{kind}"].append(abstains == gold_abstains)
        argues[kind].append(not abstains)
        if kind == "arguable" and not gold_abstains:
            scenario, parsed = env.scenario(task), parse_ply(reply)
            quality.append(argument_quality(scenario, ply, parsed))
            for case, ids in parsed.factors.items():
                cited += len(set(ids))
                lacking += len(set(ids) - set(scenario.case(case)))
    out = {k: sum(v) / len(v) for k, v in sorted(right.items())}
    out["separation"] = sum(argues["arguable"]) / len(argues["arguable"]) - sum(
        argues["non_arguable"]
    ) / len(argues["non_arguable"])
    out["argument_quality_arguable"] = sum(quality) / max(len(quality), 1)
    out["cites_a_factor_its_case_lacks"] = lacking / max(cited, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config")
    parser.add_argument("--warm", help="a built warm-start folder to read instead of training")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--episodes", type=int, default=12000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=None, help="default: the config's")
    parser.add_argument("--decision-only", action="store_true")
    parser.add_argument("--extra", type=int, default=4, help="tokens kept after the decision")
    parser.add_argument("--ply", type=int, default=1, choices=(1, 2, 3), help="the ply read")
    parser.add_argument(
        "--ply-only", action="store_true", help="train on the rows of the ply read alone"
    )
    parser.add_argument(
        "--reasoning", default=None, help="env.ablation.reasoning (default: the config's)"
    )
    parser.add_argument("--out", help="append the result as a JSON line here")
    args, config_overrides = parser.parse_known_args()

    overrides = ["--env.ablation.reasoning", args.reasoning] if args.reasoning else []
    config = load_config(args.config, overrides + config_overrides)
    env = make_env(config.env)
    start = time.time()
    if args.warm:
        model, tokenizer = load_base(config.model, path=args.warm)
    else:
        model_config = dataclasses.replace(
            config.model, tiny_layers=args.layers, tiny_hidden_size=args.hidden
        )
        model, tokenizer = load_base(
            model_config, path=tiny_model_dir(model_config, env.text_corpus())
        )
        train = teacher_rows(env, tokenizer, env.warmstart_tasks()[: args.episodes], seed=0)
        rows = [row for _, index, row in train if not args.ply_only or index == args.ply - 1]
        if args.decision_only:
            rows = [truncated(row, tokenizer, args.extra) for row in rows]
        warm = dataclasses.replace(
            config.warmstart,
            epochs=args.epochs,
            learning_rate=args.lr or config.warmstart.learning_rate,
        )
        print(f"{len(rows)} rows of {len(train)} teacher turns ({time.time() - start:.0f} s)")
        torch.manual_seed(0)
        losses = supervised_finetune(model, rows, warm, tokenizer.pad_token_id, seed=0)
        print(f"SFT: {len(losses)} steps, last loss {sum(losses[-50:]) / 50:.3f}")
    held_out = teacher_rows(env, tokenizer, env.tasks(config.eval.split), seed=1)
    result = {
        "variant": {k: v for k, v in vars(args).items() if k not in ("config", "out")},
        "overrides": config_overrides,
        "minutes": round((time.time() - start) / 60, 1),
        **{
            k: round(v, 3)
            for k, v in read_ply(
                env, model, tokenizer, held_out, args.ply - 1, config.rollout.max_new_tokens
            ).items()
        },
    }
    print(json.dumps(result, indent=1))
    if args.out:
        with Path(args.out).open("a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
