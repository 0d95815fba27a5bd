import pytest

from lexrl.errors import ModelUnavailable
from lexrl.hub import loading


def test_a_hub_failure_becomes_one_line_naming_key_model_and_ways_out(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with (
        pytest.raises(ModelUnavailable) as caught,
        loading("env.retrieval.dense_model", "org/m"),
    ):
        raise OSError("We couldn't connect to 'https://huggingface.co'\nCheck your connection")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("`env.retrieval.dense_model`: 'org/m' is not a local folder")
    for way_out in ("HF_HUB_OFFLINE is set", "huggingface-cli download org/m", "lexrl index"):
        assert way_out in message


def test_online_the_reason_is_the_hub_error_first_line(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    expected = r"\(OSError: no route\); pass a local folder"
    with pytest.raises(ModelUnavailable, match=expected), loading("model.name_or_path", "org/m"):
        raise OSError("no route\nmore")


def test_a_local_folder_keeps_its_own_error(tmp_path):
    with (
        pytest.raises(OSError, match="broken config"),
        loading("model.name_or_path", str(tmp_path)),
    ):
        raise OSError("broken config")
