"""What keys the model caches. That a seeded run repeats bit for bit, its cache builds included,
is checked by the CPU mode of scripts/gpu_train_check.py (tests/test_gpu_train_check.py)."""

import lexrl.models
from lexrl.config import ModelConfig, WarmstartConfig
from lexrl.train.warmstart import warmstart_dir


def test_caches_are_keyed_by_library_versions(tmp_path, monkeypatch):
    """An upgraded torch/transformers/tokenizers builds a new tiny model and warm-start instead of
    loading what the old versions built."""
    model = ModelConfig(cache_dir=str(tmp_path))
    base = tmp_path / "tiny-base"

    def keys() -> tuple[str, str]:
        tiny = lexrl.models._tiny_key(model, ["some text"])
        return tiny, warmstart_dir(base, WarmstartConfig(), 0, [], "torch.float32").name

    before = keys()
    installed = lexrl.models.importlib.metadata.version
    monkeypatch.setattr(
        lexrl.models.importlib.metadata,
        "version",
        lambda name: "0.0.0" if name == "transformers" else installed(name),
    )
    after = keys()
    assert before[0] != after[0] and before[1] != after[1]
