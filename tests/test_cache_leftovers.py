"""A cache entry's writer killed mid-write leaves its `.tmp-*` staging beside the entries; the next
build or read of that cache folder removes the leftovers nothing has touched for an hour, and
nothing else."""

import os
import time

from lexrl.cache_entry import build_once, entry_lock

HOUR = 3600


def _leftover(cache, name: str, age_s: float, folder: bool = True):
    path = cache / name
    if folder:
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(b"half")
    else:
        path.write_bytes(b"half")
    then = time.time() - age_s
    for item in [*(path.iterdir() if folder else []), path]:
        os.utime(item, (then, then))
    return path


def _built(entry):
    entry.mkdir(parents=True)
    (entry / "config.json").write_text("{}")


def test_a_read_of_the_cache_removes_stale_staging_and_keeps_a_write_in_progress(tmp_path):
    cache = tmp_path / "cache"
    _built(cache / "tiny-a")
    stale = _leftover(cache, ".tmp-killed", 2 * HOUR)
    stale_file = _leftover(cache, ".tmp-file", 2 * HOUR, folder=False)
    writing = _leftover(cache, ".tmp-writing", HOUR - 300)
    # A folder left long ago but written into a minute ago is a write in progress.
    busy = _leftover(cache, ".tmp-busy", 3 * HOUR)
    (busy / "tokenizer.json").write_text("{}")
    old_entry = _leftover(cache, "tiny-old", 5 * HOUR)

    assert build_once(cache / "tiny-a", _built) == cache / "tiny-a"
    assert not stale.exists() and not stale_file.exists()
    assert writing.is_dir() and busy.is_dir() and old_entry.is_dir()
    assert (cache / "tiny-a" / "config.json").is_file()


def test_a_build_removes_stale_staging_before_it_writes(tmp_path):
    cache = tmp_path / "cache"
    stale = _leftover(cache, ".tmp-killed", 2 * HOUR)
    with entry_lock(cache / "tiny-b"):
        assert not stale.exists()
    assert build_once(cache / "tiny-c", _built) == cache / "tiny-c"
    assert (cache / "tiny-c" / "config.json").is_file()
