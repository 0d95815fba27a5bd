"""A dataset path that is a folder is said to be one, with what it holds, not "not found"."""

import pytest

from lexrl.envs.data import read_json, read_jsonl
from lexrl.envs.statute.data import read_corpus
from lexrl.errors import DatasetError


@pytest.mark.parametrize("read", [read_corpus, lambda p: list(read_jsonl(p)), read_json])
def test_a_folder_given_as_a_dataset_file_is_named_a_folder_with_its_files(tmp_path, read):
    folder = tmp_path / "stard"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("")
    (folder / "queries.json").write_text("")
    with pytest.raises(DatasetError) as raised:
        read(folder)
    assert str(raised.value) == (
        f"{folder} is a folder, not a dataset file (it holds corpus.jsonl, queries.json): "
        "give the file"
    )
    with pytest.raises(DatasetError, match=f"^dataset file not found: {tmp_path / 'none'}$"):
        read(tmp_path / "none")
