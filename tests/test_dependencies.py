"""The package's dependencies point one way (docs: architecture, "Dependencies point one way")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "lexrl"

# Sub-package -> the lexrl sub-packages it must never import (lazily inside a function included).
FORBIDDEN = {
    "hub": ("config", "models", "envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "models": ("envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "types": ("envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "config": ("envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "retrieval": ("envs", "rewards", "rollout", "train", "eval", "cli"),
    "rewards": ("envs", "retrieval", "rollout", "train", "eval", "cli"),
    "rollout": ("train", "eval", "cli"),
    "envs": ("train", "eval", "cli"),
    "eval": ("train", "cli"),
    "train": ("cli",),
}


def lexrl_imports(path: Path) -> set[str]:
    """The `lexrl.<sub-package>` names a module imports anywhere in its body."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] == "lexrl" and len(parts) > 1:
                names.add(parts[1])
    return names


def layer_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_imports_a_layer_above_it(path: Path) -> None:
    forbidden = set(FORBIDDEN.get(layer_of(path), ())) & lexrl_imports(path)
    assert not forbidden, f"lexrl/{path.relative_to(PACKAGE)} imports lexrl.{sorted(forbidden)}"


def test_the_check_sees_a_lazy_import(tmp_path: Path) -> None:
    module = tmp_path / "serve.py"
    module.write_text("def serve():\n    from lexrl.train.trainer import resolve_base\n")
    assert lexrl_imports(module) == {"train"}
