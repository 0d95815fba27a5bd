"""What a report says of where its numbers came from (`lexrl.eval.provenance`): each field on its
own, and None, never an error, where the machine cannot tell (no git, no /proc/cpuinfo)."""

import hashlib
import importlib
import importlib.metadata
import json
import subprocess
from pathlib import Path

import yaml

from lexrl.config import Config
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.mixture_options import MixEnvConfig, MixMember
from lexrl.eval import provenance as provenance_module
from lexrl.eval.provenance import (
    caps,
    config_dict,
    config_sha256,
    cpu_model,
    env_files,
    env_package,
    env_packages,
    git_state,
    library_versions,
    machine,
    markdown,
    policy_source,
    provenance,
    sampling,
)

KEYS = [
    "lexrl",
    "config_sha256",
    "env_packages",
    "policy",
    "sampling",
    "caps",
    "prompts",
    "seeds",
    "checkpoint",
    "libraries",
    "machine",
    "config",
]


def test_the_block_has_every_field_and_the_hash_is_of_its_config():
    config = Config()
    block = provenance(config, None)
    assert list(block) == KEYS
    assert block["config"]["eval"]["seed"] == config.eval.seed
    canonical = json.dumps(block["config"], sort_keys=True, separators=(",", ":"))
    assert block["config_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert block["seeds"] == {"run.seed": 0, "eval.seed": 1234}
    assert block["checkpoint"] is None
    json.dumps(block)  # JSON-ready as it is


def test_a_prompts_folder_is_recorded_by_the_hash_of_each_file(tmp_path):
    (tmp_path / "plaintiff.txt").write_text("Plaintiff's lawyer.\n")
    (tmp_path / ".DS_Store").write_bytes(b"\0")
    config = Config()
    assert provenance(config, None)["prompts"] == {}
    config.env = ArgumentEnvConfig(prompts_dir=str(tmp_path))
    digest = hashlib.sha256(b"Plaintiff's lawyer.\n").hexdigest()
    assert provenance(config, None)["prompts"] == {"env.prompts_dir": {"plaintiff.txt": digest}}
    (tmp_path / "plaintiff.txt").write_text("Plaintiff's counsel.\n")
    assert provenance(config, None)["prompts"]["env.prompts_dir"]["plaintiff.txt"] != digest


def test_another_config_has_another_hash():
    other = Config()
    other.eval.seed += 1
    assert config_sha256(config_dict(other)) != config_sha256(config_dict(Config()))


def test_the_endpoint_is_named_without_its_credentials():
    config = Config()
    config.rollout.backend = "openai"
    config.model.name_or_path = "vendor/model"
    config.rollout.base_url = "https://user:secret@api.example.com/v1?api_key=abc123"
    source = policy_source(config)
    assert source["backend"] == "openai" and source["model"] == "vendor/model"
    assert "secret" not in source["endpoint"] and "abc123" not in source["endpoint"]
    assert source["endpoint"].startswith("https://***@api.example.com/v1")
    assert sampling(config)["top_p"] == "endpoint default"


def test_sampling_and_caps_are_the_evaluated_envs_own():
    config = Config()
    config.env = MixEnvConfig(
        members=[
            MixMember(env=GdprEnvConfig(max_new_tokens=40)),
            MixMember(env=DebateEnvConfig()),
        ]
    )
    config.eval.greedy = True
    config.eval.samples_per_task = 4
    drawn = sampling(config)
    assert (drawn["greedy"], drawn["samples_per_task"], drawn["top_p"]) == (True, 4, 1.0)
    assert drawn["temperatures"] == {
        "env.members[0].env.temperature": 1.0,
        "env.members[1].env.debater_temperature": 0.7,
        "env.members[1].env.judge_temperature": 0.1,
    }
    limits = caps(config)
    assert limits["rollout.max_new_tokens"] == 96
    assert limits["env.members[0].env.max_new_tokens"] == 40
    # Unset per-role caps (None: `rollout.max_new_tokens`) and other envs' are left out.
    assert "env.members[0].env.agent_max_new_tokens" not in limits
    assert all(key.startswith(("rollout.", "env.members[")) for key in limits)
    assert limits["env.members[1].env.judge_max_new_tokens"] == 500
    # A single env's options sit under `env` itself.
    single = Config()
    single.env = GdprEnvConfig(max_new_tokens=40)
    assert sampling(single)["temperatures"] == {"env.temperature": 1.0}
    assert caps(single)["env.max_new_tokens"] == 40


def test_the_checkpoint_is_identified_by_its_adapters_digest(tmp_path):
    adapter = tmp_path / "step-000001" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    block = provenance(Config(), str(tmp_path / "step-000001"))
    assert block["checkpoint"] == {
        "path": str((tmp_path / "step-000001").resolve()),
        "adapter_sha256": hashlib.sha256(b"weights").hexdigest(),
    }


def test_git_gives_the_commit_and_whether_tracked_files_changed(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    assert git_state(tmp_path) is None  # not a repository
    git("init", "-q")
    (tmp_path / "__init__.py").write_text("")
    git("add", "__init__.py")
    assert git_state(tmp_path) is None  # no commit yet
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    state = git_state(tmp_path)
    assert len(state["commit"]) == 40 and state["dirty"] is False
    (tmp_path / "__init__.py").write_text("x = 1\n")
    assert git_state(tmp_path)["dirty"] is True


def test_a_repository_that_does_not_track_the_package_is_not_its_commit(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    package = tmp_path / "venv" / "lexrl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert git_state(package) is None


def test_without_git_or_proc_the_fields_are_null(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git to run
    monkeypatch.setattr(provenance_module, "gpu_name", lambda: 1 / 0)
    block = provenance(Config(), None)
    assert block["lexrl"]["git"] is None
    assert block["machine"]["gpu"] is None
    found = machine(tmp_path / "no-cpuinfo")
    assert found["cpu"] is None and found["python"] and found["cores"] >= 1


def test_the_cpu_is_the_first_model_name(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\n\nmodel name\t: other\n")
    assert cpu_model(cpuinfo) == "Some CPU @ 2.0GHz"
    cpuinfo.write_text("processor\t: 0\nHardware\t: an ARM board\n")
    assert cpu_model(cpuinfo) is None


def test_a_library_not_installed_is_null():
    versions = library_versions(("torch", "no-such-distribution-lexrl"))
    assert versions["torch"] and versions["no-such-distribution-lexrl"] is None


def test_the_markdown_section_shows_all_but_the_config_itself():
    block = provenance(Config(), None)
    text = markdown(block)
    assert text.startswith("## Provenance\n")
    fenced = text.split("```yaml\n")[1].split("```")[0]
    shown = yaml.safe_load(fenced)
    assert "config" not in shown and shown["config_sha256"] == block["config_sha256"]
    assert shown["seeds"] == block["seeds"]


def test_a_built_in_env_is_recorded_as_lexrls_with_a_hash_of_its_prompts():
    from lexrl.envs.statute.options import StatuteEnvConfig

    record = env_packages(StatuteEnvConfig())["statute"]
    assert record["module"] == "lexrl.envs.statute.options"
    assert record["distribution"] == "lexrl"
    assert record["version"] == importlib.metadata.version("lexrl")
    folder = Path(provenance_module.__file__).parents[1] / "envs" / "statute"
    prompts = sorted((folder / "prompts").rglob("*.txt"))
    assert prompts and record["files"] == len(env_files(folder)) >= len(prompts)
    assert record["bytes"] == sum(path.stat().st_size for _, path in env_files(folder))
    lines = "".join(
        f"{name} {hashlib.sha256(path.read_bytes()).hexdigest()}\n"
        for name, path in env_files(folder)
    )
    assert record["sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    assert prompts[0].relative_to(folder).as_posix() in dict(env_files(folder))


def test_a_mixture_records_each_member_and_the_block_carries_them():
    config = Config()
    config.env = MixEnvConfig(
        members=[MixMember(env=GdprEnvConfig()), MixMember(env=DebateEnvConfig())]
    )
    block = provenance(config, None)
    assert list(block["env_packages"]) == ["gdpr", "debate"]
    assert all(entry["distribution"] == "lexrl" for entry in block["env_packages"].values())


def test_an_env_packages_files_change_its_hash_and_hidden_ones_do_not(tmp_path, monkeypatch):
    package = tmp_path / "clauses"
    (package / "prompts").mkdir(parents=True)
    (package / "data").mkdir()
    (package / "options.py").write_text("class Options:\n    pass\n")
    (package / "prompts" / "rater.txt").write_text("Rate the clause.\n")
    (package / "data" / "tasks.jsonl").write_text('{"id": "1"}\n')
    (package / "data" / ".cache").write_text("left out")
    monkeypatch.syspath_prepend(str(tmp_path))
    options = importlib.import_module("clauses.options").Options
    first = env_package(options)
    # Run from a folder, not installed: no distribution to name, the files all the same.
    assert (first["distribution"], first["version"], first["files"]) == (None, None, 2)
    (package / "data" / ".cache").write_text("changed")
    assert env_package(options)["sha256"] == first["sha256"]
    (package / "prompts" / "rater.txt").write_text("Rate the clause, low or high.\n")
    assert env_package(options)["sha256"] != first["sha256"]


def test_a_checkpoint_manifest_records_the_env_packages_and_still_verifies(tmp_path):
    from lexrl.envs.statute.options import StatuteEnvConfig
    from lexrl.train.checkpoint import seal
    from lexrl.train.manifest import MANIFEST_FILE, verify_checkpoint

    staging, target = tmp_path / ".staging-step-000001", tmp_path / "step-000001"
    (staging / "adapter").mkdir(parents=True)
    (staging / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")
    packages = env_packages(StatuteEnvConfig())
    seal(staging, target, {"step": 1}, packages)
    manifest = json.loads((target / MANIFEST_FILE).read_text())
    assert manifest["env_packages"] == packages
    assert "trainer_state.json" in manifest["files"]
    assert verify_checkpoint(target) is True
