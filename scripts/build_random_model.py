"""Write a random-weight model of the Qwen3-4B architecture (no download) with a tokenizer trained
on the demo env's text, for timing training steps on a GPU machine without hub access.

    python scripts/build_random_model.py --out runs/random-qwen3-4b
    lexrl train configs/demo_cpu.yaml --model.name_or_path runs/random-qwen3-4b \\
        --model.dtype bfloat16 --warmstart.enabled false --rollout.backend vllm-engine \\
        --grpo.num_generations 8 --grpo.tasks_per_step 2 --run.max_steps 3 \\
        --run.eval_before false --run.eval_after false --run.output_dir runs/step_time_4b
    # seconds per update (16 trajectories): perf/step_s in runs/step_time_4b/metrics.jsonl

The sizes are Qwen3-4B's (hidden 2560, 36 layers, 32 query / 8 key-value heads of 128,
intermediate 9728, vocabulary 151,936, tied embeddings); `--layers`/`--hidden`/... shrink it for a
check on a CPU. Random weights never emit the end token, so every call runs to
`rollout.max_new_tokens`: a worst case for generation time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from lexrl.envs import make_env
from lexrl.models import train_tokenizer
from lexrl.registry import default_env

QWEN3_4B = {
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151_936,
    "max_position_embeddings": 40_960,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}


def build(out: Path, sizes: dict, dtype: torch.dtype, seed: int = 0) -> Path:
    tokenizer = train_tokenizer(make_env(default_env()).text_corpus(), vocab_size=4000)
    config = Qwen3Config(
        **sizes,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen3ForCausalLM(config).to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    parameters = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": str(out), "parameters": parameters, "dtype": str(dtype)}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    for key in ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab"):
        parser.add_argument(f"--{key.replace('_', '-')}", type=int, default=None)
    args = parser.parse_args()
    sizes = dict(QWEN3_4B)
    for key, field in (
        ("layers", "num_hidden_layers"),
        ("hidden", "hidden_size"),
        ("intermediate", "intermediate_size"),
        ("heads", "num_attention_heads"),
        ("kv_heads", "num_key_value_heads"),
        ("vocab", "vocab_size"),
    ):
        if getattr(args, key) is not None:
            sizes[field] = getattr(args, key)
    build(args.out, sizes, getattr(torch, args.dtype), args.seed)


if __name__ == "__main__":
    main()
