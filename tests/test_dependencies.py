"""The package's dependencies point one way (docs: architecture, "Dependencies point one way")."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "lexrl"

# Sub-package -> the lexrl sub-packages it must never import (lazily inside a function included).
FORBIDDEN = {
    "hub": ("config", "models", "envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "models": ("envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "types": ("envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "options": ("config", "registry", "envs", "retrieval", "rewards", "rollout", "train", "eval"),
    "registry": ("config", "envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "config": ("envs", "retrieval", "rewards", "rollout", "train", "eval", "cli"),
    "retrieval": ("envs", "rewards", "rollout", "train", "eval", "cli"),
    "rewards": ("envs", "retrieval", "rollout", "train", "eval", "cli"),
    "rollout": ("train", "eval", "cli"),
    "envs": ("train", "eval", "cli"),
    "eval": ("train", "cli"),
    "train": ("cli",),
}


# Options modules: the env option dataclasses the registry finds by entry point (and what they
# nest). They import nothing of lexrl but each other and the option machinery, so loading a
# config never pulls in an env, torch or an HTTP client.
OPTIONS_MODULES = re.compile(
    r"lexrl\.envs\.\w+\.options|lexrl\.envs\.mixture_options|lexrl\.retrieval\.options"
    r"|lexrl\.rewards\.judge_config|lexrl\.options|lexrl\.env_options|lexrl\.registry|lexrl\.errors"
)


def lexrl_modules(path: Path) -> set[str]:
    """The `lexrl.*` modules a module imports anywhere in its body."""
    modules = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return {module for module in modules if module.startswith("lexrl.")}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (imports for annotations only)."""
    nodes = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            continue
        nodes += [node, *_runtime_nodes(node)]
    return nodes


def lexrl_imports(path: Path) -> set[str]:
    """The `lexrl.<sub-package>` names a module imports anywhere in its body (for the config
    layer, options modules aside)."""
    composes_options = path.is_relative_to(PACKAGE) and layer_of(path) == "config"
    return {
        module.split(".")[1]
        for module in lexrl_modules(path)
        if not (composes_options and OPTIONS_MODULES.fullmatch(module))
    }


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


OPTIONS_FILES = [
    path
    for path in sorted(PACKAGE.rglob("*.py"))
    if OPTIONS_MODULES.fullmatch(
        ".".join(("lexrl", *path.relative_to(PACKAGE).with_suffix("").parts))
    )
]


def test_there_are_options_modules() -> None:
    assert len(OPTIONS_FILES) >= 2


@pytest.mark.parametrize("path", OPTIONS_FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_options_modules_import_only_options_modules(path: Path) -> None:
    # `build()` imports its env lazily, when the env is made, not when the options load.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    imported = {node.module for node in top if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in top if isinstance(node, ast.Import) for alias in node.names}
    modules = {module for module in imported if module.startswith("lexrl.")}
    others = {m for m in modules if not OPTIONS_MODULES.fullmatch(m)}
    assert not others, f"lexrl/{path.relative_to(PACKAGE)} imports {sorted(others)}"


def test_loading_the_config_imports_no_torch_env_or_http_client() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, lexrl.config; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    heavy = {"torch", "openai", "transformers", "lexrl.envs.base", "lexrl.envs.lexam.env"}
    assert not heavy & set(loaded)


MAKE_EVERY_ENV = """
import sys
from lexrl.envs import make_env
from lexrl.registry import discover_envs
from lexrl.train.manifest import verify_checkpoint
for name, options in sorted(discover_envs().items()):
    if name != "mix":
        make_env(options())
print(" ".join(sys.modules))
"""


def test_making_an_env_and_verifying_a_checkpoint_import_no_torch() -> None:
    # `lexrl eval` makes the env (reading its data) and verifies `--checkpoint` before the model
    # loads, so a malformed line or a damaged checkpoint is reported in a second, not after
    # torch's and transformers' 10 s of imports.
    loaded = subprocess.run(
        [sys.executable, "-c", MAKE_EVERY_ENV], capture_output=True, text=True, check=True
    ).stdout.split()
    assert {"lexrl.envs.statute.env", "lexrl.envs.argument.env"} <= set(loaded)
    assert not {"torch", "transformers", "peft", "accelerate"} & set(loaded)


def test_a_statute_evaluation_without_an_endpoint_imports_no_openai() -> None:
    # openai costs a process a second to import; only a configured final reranker, judge or
    # endpoint retriever makes a client.
    script = (
        "import sys\n"
        "from lexrl.envs import make_env\n"
        "from lexrl.envs.statute import report\n"
        "from lexrl.envs.statute.options import StatuteEnvConfig\n"
        "make_env(StatuteEnvConfig())\n"
        "print(' '.join(sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "lexrl.envs.statute.report" in loaded
    assert "openai" not in loaded
