"""How often a model writes LEXam's `###X###` answer marker, per examinee prompt: the measurement
behind the CPU demo's `brief` prompt (docs/benchmarks.md).

    python scripts/lexam_format_probe.py [--model smollm2-135m] [--questions 16] [--samples 4]

For the first `questions` training questions of the shipped English MCQ-4 sample, samples
`samples` answers at temperature 1 with at most `--max-new-tokens` tokens under each prompt:
`paper` (LEXam App. E.4), `brief` without its worked example, and `brief` as the env builds it
(with the example), and prints the share of answers with a parsable marker and of right ones.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from lexrl.config import ModelConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.envs.mcq import parse_mcq_answer
from lexrl.models import load_base


def conversations(env: LexamEnv, tasks: list, variant: str) -> list[list[dict[str, str]]]:
    prompt = "paper" if variant == "paper" else "brief"
    system = LexamEnv(LexamEnvConfig(prompt=prompt)).prompts["examinee"]
    result = []
    for task in tasks:
        example = env.demonstration(task) if variant == "brief with example" else []
        result.append(
            [
                {"role": "system", "content": system.format(course=task.inputs["course"])},
                *example,
                {"role": "user", "content": f"{env.question_text(task)}\nAnswer:"},
            ]
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--cache-dir", default=".lexrl_cache")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model, tokenizer = load_base(ModelConfig(name_or_path=args.model, cache_dir=args.cache_dir))
    env = LexamEnv(LexamEnvConfig(prompt="brief"))
    tasks = env.tasks("train")[: args.questions]
    print("| prompt | answers | marker parsed | right | seconds |\n|---|---|---|---|---|")
    rows = []
    for variant in ("paper", "brief without example", "brief with example"):
        torch.manual_seed(args.seed)
        started = time.perf_counter()
        batch = tokenizer.apply_chat_template(
            conversations(env, tasks, variant),
            add_generation_prompt=True,
            padding=True,
            return_tensors="pt",
            return_dict=True,
        )
        with torch.no_grad():
            output = model.generate(
                **batch,
                max_new_tokens=args.max_new_tokens,
                do_sample=True,
                temperature=1.0,
                num_return_sequences=args.samples,
            )
        texts = tokenizer.batch_decode(
            output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True
        )
        answers = [
            parse_mcq_answer(text, task.meta["n_options"])
            for text, task in zip(
                texts, [t for t in tasks for _ in range(args.samples)], strict=True
            )
        ]
        golds = [t.gold for t in tasks for _ in range(args.samples)]
        parsed = sum(a is not None for a in answers)
        right = sum(a == g for a, g in zip(answers, golds, strict=True))
        seconds = time.perf_counter() - started
        print(f"| {variant} | {len(texts)} | {parsed} | {right} | {seconds:.0f} |", flush=True)
        rows.append({"prompt": variant, "answers": len(texts), "parsed": parsed, "right": right})
    machine = f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}"
    print(json.dumps({"model": args.model, "rows": rows, "machine": machine}))


if __name__ == "__main__":
    main()
