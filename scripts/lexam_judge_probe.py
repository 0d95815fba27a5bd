"""Can a model on this machine judge LEXam open answers? The measurement behind the CPU mixture
demo's stand-in judge, `builtin:reference-overlap` (docs/benchmarks.md).

    python scripts/lexam_judge_probe.py [--model smollm2-135m] [--questions 12]
    python scripts/lexam_judge_probe.py --base-url http://127.0.0.1:8000/v1 --served-model NAME

For the `questions` open questions of the shipped English sample with the shortest reference
answers, four answers are judged at temperature 0 by vLLM: the reference answer itself, another
question's reference answer, "I do not know." and the first 400 characters of the question.
Three ways of asking: `paper` (LEXam's judge prompt, App. E.2, as the env sends it), `few-shot`
(a short instruction and two graded examples) and `forced` (the few-shot text as a plain
completion that already opens `[[`, so only the number is left to write). Prints, per way and
answer, the share of replies with a parsable `[[x]]` and the mean parsed score. A judge worth
using scores the reference answer near 1 and the others lower.

With `--base-url` the same prompts go, as text completions, to a server of the same model
(`lexrl serve`'s, or any OpenAI-compatible one) instead of a vLLM engine started here: the CPU
test asks the served SmolLM2 of the test session so (tests/scripts/).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from lexrl.config import ModelConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig
from lexrl.models import builtin_model_dir
from lexrl.rewards.judge import JudgeParseError, parse_bracket_score
from lexrl.types import Task

FEW_SHOT = """You grade a student's answer against the reference answer. Reply with one score in \
double brackets: [[1.0]] if the answer says what the reference says, [[0.5]] if it says part of \
it, [[0.0]] if it misses it or says nothing relevant.

Reference: The contract is void because the seller lacked capacity.
Answer: The seller had no capacity, so the contract is void.
Score: [[1.0]]

Reference: The contract is void because the seller lacked capacity.
Answer: the the law court of of pigs
Score: [[0.0]]

Reference: {reference}
Answer: {answer}
Score:"""
_NUMBER = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*\]\]")
Generate = Callable[[list[str]], list[str]]
"""Greedy replies to text prompts, in order."""


def answers(tasks: list[Task], index: int) -> dict[str, str]:
    task = tasks[index]
    return {
        "reference": task.gold,
        "other reference": tasks[(index + 1) % len(tasks)].gold,
        "I do not know.": "I do not know.",
        "the question": task.inputs["question"][:400],
    }


def prompt(
    way: str, env: LexamEnv, task: Task, answer: str, tokenizer: PreTrainedTokenizerBase
) -> str:
    if way == "paper":
        messages = env.judge_messages(task, answer)
    else:
        text = FEW_SHOT.format(reference=task.gold[:800], answer=answer[:800])
        if way == "forced":
            return text + " [["
        messages = [{"role": "user", "content": text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def score(way: str, reply: str) -> float | None:
    if way == "forced":
        match = _NUMBER.match(reply)
        value = float(match.group(1)) if match else None
        return value if value is not None and 0.0 <= value <= 1.0 else None
    try:
        return parse_bracket_score(reply)
    except JudgeParseError:
        return None


def in_process(path: str | Path, max_tokens: int) -> tuple[Generate, PreTrainedTokenizerBase]:
    """A vLLM engine of the model at `path`, started here."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(path), max_model_len=4096, gpu_memory_utilization=0.5, dtype="float32")
    sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    def generate(prompts: list[str]) -> list[str]:
        return [out.outputs[0].text for out in llm.generate(prompts, sampling)]

    return generate, llm.get_tokenizer()


def served(
    base_url: str, model: str, path: str | Path, max_tokens: int
) -> tuple[Generate, PreTrainedTokenizerBase]:
    """The model served as `model` at `base_url` (OpenAI's completions API); the chat template
    from its files at `path`."""
    from openai import OpenAI
    from transformers import AutoTokenizer

    client = OpenAI(base_url=base_url, api_key="EMPTY")  # a local server: no key

    def generate(prompts: list[str]) -> list[str]:
        response = client.completions.create(
            model=model, prompt=prompts, temperature=0.0, max_tokens=max_tokens
        )
        return [choice.text for choice in sorted(response.choices, key=lambda c: c.index)]

    return generate, AutoTokenizer.from_pretrained(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--cache-dir", default=".lexrl_cache")
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument(
        "--base-url", help="ask this OpenAI-compatible server (with /v1) instead of starting vLLM"
    )
    parser.add_argument("--served-model", help="the model's name there (default: --model)")
    args = parser.parse_args()

    config = ModelConfig(name_or_path=args.model, cache_dir=args.cache_dir)
    path = builtin_model_dir(config) or args.model
    env = LexamEnv(LexamEnvConfig(config="open_question", language="en"))
    tasks = env.tasks("train") + env.tasks("test")
    tasks = sorted(tasks, key=lambda task: len(task.gold))[: args.questions]
    if args.base_url:
        model = args.served_model or args.model
        generate, tokenizer = served(args.base_url, model, path, args.max_tokens)
    else:
        generate, tokenizer = in_process(path, args.max_tokens)
    print("| way | answer | replies with a score | mean score |\n|---|---|---|---|")
    for way in ("paper", "few-shot", "forced"):
        for kind in answers(tasks, 0):
            prompts = [
                prompt(way, env, task, answers(tasks, i)[kind], tokenizer)
                for i, task in enumerate(tasks)
            ]
            replies = generate(prompts)
            scores = [s for s in (score(way, reply) for reply in replies) if s is not None]
            mean = f"{sum(scores) / len(scores):.2f}" if scores else "-"
            print(f"| {way} | {kind} | {len(scores)}/{len(replies)} | {mean} |", flush=True)


if __name__ == "__main__":
    main()
