"""lexrl's floors: a module imports from its own floor or a lower one, never from above.

The env contract (`lexrl.policy`, `lexrl.generation`, `lexrl.types`, `lexrl.errors`) is on the
ground floor, so an env codes against it without importing the rollout engine, and the engine
runs an env without importing any env. Read from the source with `ast`, so an import inside a
function counts as much as one at the top; an import under `if TYPE_CHECKING:` counts only if
it is not one of the type-only imports named below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lexrl

PACKAGE = Path(lexrl.__file__).parent

FLOORS: list[set[str]] = [
    {
        "lexrl",
        "lexrl.bootstrap",
        "lexrl.cache_entry",
        "lexrl.chat_client",
        "lexrl.config",
        "lexrl.env_options",
        "lexrl.errors",
        "lexrl.generation",
        "lexrl.hub",
        "lexrl.jsonl",
        "lexrl.models",
        "lexrl.options",
        "lexrl.plugin_errors",
        "lexrl.policy",
        "lexrl.registry",
        "lexrl.run_lock",
        "lexrl.secrets",
        "lexrl.stop_signals",
        "lexrl.types",
    },
    {"lexrl.retrieval", "lexrl.rewards"},
    {"lexrl.envs"},
    {"lexrl.rollout"},
    {"lexrl.eval"},
    {"lexrl.train"},
    {"lexrl.integrations", "lexrl.cli", "lexrl.help", "lexrl.scaffold"},
]
"""Lowest first. A name is a module or a package (every module under it)."""

TYPE_ONLY_UPWARDS = {
    ("lexrl.registry", "lexrl.envs.base"),
    ("lexrl.rollout.engine", "lexrl.envs.base"),
}
"""Upward imports allowed under `if TYPE_CHECKING:` only: the registry and the engine name the
`Env` type in signatures, and never run env code of their own."""


def floor_of(module: str) -> int:
    matches = [
        (len(name), level)
        for level, names in enumerate(FLOORS)
        for name in names
        if module == name or module.startswith(name + ".")
    ]
    assert matches, f"{module} is on no floor: add it to FLOORS in {__file__}"
    return max(matches)[1]


def module_name(path: Path) -> str:
    parts = ("lexrl", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, module: str | None = None) -> list[tuple[str, bool, int]]:
    """(imported module, under TYPE_CHECKING, line) of every lexrl import in the file, which is
    the module `module` (by default, the one its path under lexrl/ names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    package = (module or module_name(path)).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            names = [".".join([*base, node.module] if node.module else base)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [(n, id(node) in type_only, node.lineno) for n in names if n.startswith("lexrl")]
    return found


def test_no_module_imports_from_a_floor_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for target, type_only, line in imports(path):
            if floor_of(target) <= floor_of(source):
                continue
            if type_only and (source, target) in TYPE_ONLY_UPWARDS:
                continue
            upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} {source} -> {target}")
    assert upward == [], "imports from a higher floor:\n" + "\n".join(upward)


def test_rollout_and_envs_do_not_import_each_other_at_run_time():
    crossings = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for target, type_only, line in imports(path):
            pair = {source.split(".")[1:2][0] if "." in source else "", target.split(".")[1]}
            if pair == {"rollout", "envs"} and not type_only:
                crossings.append(f"{path.relative_to(PACKAGE.parent)}:{line} -> {target}")
    assert crossings == []


def test_the_floor_check_sees_an_upward_import_and_a_type_only_one(tmp_path):
    """The check itself can fail: an env module that imports the engine, even relatively, is
    caught; the same import under TYPE_CHECKING is told apart."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ...rollout.engine import run_groups\n"
        "if TYPE_CHECKING:\n"
        "    from lexrl.rollout.policy_probe import Probe\n",
        encoding="utf-8",
    )
    found = imports(module, module="lexrl.envs.statute.probe")
    assert found == [("lexrl.rollout.engine", False, 2), ("lexrl.rollout.policy_probe", True, 4)]
    assert all(floor_of(target) > floor_of("lexrl.envs.statute.probe") for target, _, _ in found)
