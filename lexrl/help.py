"""`--help` that fits a screen: a command's own flags, then the config's most used keys per
section (`MOST_USED`, chosen by hand), and where the rest is: `--help-all` (draccus' list of every
key) and `lexrl config show SECTION` (every key of one section with its type, default and
docstring, `show_section`). The docstrings are read from the config dataclasses' source, so the
help says what the code's documentation says. Imports no torch.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import re
import textwrap
import typing
from dataclasses import MISSING, Field, fields, is_dataclass

from lexrl.config import Config, ConfigError
from lexrl.registry import EnvConfig, describe, discover_envs, failed_plugins

WIDTH = 100
"""Longest line of the summary; longer docstring sentences are cut with `...`."""
FLAG_COLUMN = 34
"""Width of the `--section.key default` column."""

SECTIONS: dict[str, str] = {
    "model": "the base model the LoRA sits on (for `rollout.backend: openai`: the served name)",
    "lora": "the LoRA adapter GRPO trains",
    "rollout": "how completions are generated: backend, endpoints, token caps",
    "grpo": "the GRPO update: group size, loss, optimizer",
    "env": "the task environment: `env.type` names a registered env, `env.*` its options",
    "warmstart": "supervised warm-start on scripted episodes before GRPO",
    "eval": "what `lexrl eval` and the before/after evaluations play",
    "logging": "W&B and the metric log",
    "run": "the run folder, seed and length",
}
"""Every section of `Config` with its one-line purpose (a test keeps the keys equal)."""

MOST_USED: dict[str, tuple[str, ...]] = {
    "model": ("name_or_path", "dtype"),
    "lora": ("r", "alpha"),
    "rollout": ("backend", "base_url", "api_key_env", "vllm_urls", "max_new_tokens"),
    "grpo": ("num_generations", "tasks_per_step", "loss", "learning_rate", "beta"),
    "env": ("type",),
    "warmstart": ("enabled",),
    "eval": ("split", "max_tasks", "samples_per_task", "greedy"),
    "logging": ("wandb_mode",),
    "run": ("output_dir", "seed", "max_steps", "resume"),
}
"""The keys the summary shows per section: what a first run or a first evaluation sets."""


@functools.cache
def field_docstrings(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), dedented; a field
    a base class declares (a shared option type, `lexrl.env_options`) has its base's docstring."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs |= _own_field_docstrings(klass)
    return docs


def _own_field_docstrings(cls: type) -> dict[str, str]:
    if cls is object:
        return {}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # no source (a frozen install): the help goes without
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, following in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def first_sentence(docstring: str, width: int) -> str:
    """The docstring's first sentence on one line, cut to `width` characters."""
    text = " ".join(docstring.split())
    # A sentence ends before a capital, a backtick or a parenthesis: `sec. 3.3` and `eq. 7` go on.
    match = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s+(?=[A-Z`(])|$)", text)
    sentence = text[: match.start() + 1] if match else text
    if len(sentence) <= width:
        return sentence
    return sentence[: width - 3].rpartition(" ")[0].rstrip(",;:") + "..."


def _default(item: Field) -> object:
    if item.default_factory is not MISSING:
        return item.default_factory()
    return item.default


def show_value(value: object) -> str:
    """A default as it is written on the command line or in YAML."""
    if value is MISSING:
        return "(required)"
    if value == "":
        return '""'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    return str(value)


def type_name(hint: object) -> str:
    """`int | None`, `list[str]`, `list[JudgeConfig]`: a type as the help shows it."""
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    text = str(hint).replace("typing.", "")
    return re.sub(r"(?:\w+\.)+(\w+)", r"\1", text)


def config_summary(width: int = WIDTH) -> str:
    """One screen of the config: each section's purpose and its `MOST_USED` keys with default
    and first docstring sentence."""
    lines = ["config keys (YAML sections, or `--section.key value` after CONFIG):"]
    sections = {item.name: item for item in fields(Config)}
    for name, purpose in SECTIONS.items():
        default = _default(sections[name])
        cls = type(default)
        lines.append(f"  {name}: {purpose}")
        items = {item.name: item for item in fields(cls)}
        docs = field_docstrings(cls)
        if isinstance(default, EnvConfig):
            docs = {
                "type": "A registered env (`lexrl envs` lists them); `lexrl config show "
                "env.NAME` shows its options."
            }
        for key in MOST_USED[name]:
            value = default.name if key == "type" else _default(items[key])
            flag = f"    --{name}.{key} {show_value(value)}"
            flag = flag if len(flag) <= FLAG_COLUMN else flag[: FLAG_COLUMN - 3] + "..."
            room = width - FLAG_COLUMN - 2
            lines.append(
                f"{flag:{FLAG_COLUMN}s}  {first_sentence(docs.get(key, ''), room)}".rstrip()
            )
    lines += [
        "more: `lexrl config show SECTION` (every key of a section: type, default, docstring;",
        "      SECTION such as grpo or env.lexam), or --help-all (every key of every section)",
    ]
    return "\n".join(lines)


def _section_class(path: str) -> type:
    """The dataclass a dotted section path names (`grpo`, `env.lexam`, `env.lexam.judges`)."""
    return _resolve(path)[0]


def _resolve(path: str) -> tuple[type, str]:
    """The dataclass a section path names, and how its keys are written: `--grpo` for a
    section, `env.lexam.judges[]` for the entries of a list, which the command line sets whole
    (`--env.judges '[{base_url: ..., model: ...}]'`) or a YAML file sets entry by entry. Below
    `env`, an env's name picks its options class (`env.lexam`: `--env.source`, ...)."""
    cls: type = Config
    written = "--"
    for part in path.split("."):
        if cls is EnvConfig:
            known = discover_envs()
            if part not in known:
                failure = failed_plugins().get(part)
                why = f"its plugin failed to load ({failure})" if failure else "registered: "
                why += "" if failure else ", ".join(known)
                raise ConfigError(f"`{path}`: no env {part!r}; {why}")
            cls = known[part]
            continue
        items = {item.name: item for item in fields(cls)} if is_dataclass(cls) else {}
        if part not in items:
            raise ConfigError(f"no config section {path!r}; {_sections_hint(path)}")
        hint = typing.get_type_hints(cls)[part]
        # A list of entries (`env.members`, `judges`) is shown as one entry's keys.
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        if not is_dataclass(inner):
            raise ConfigError(
                f"`{path}` is a key, not a section; `lexrl config show "
                f"{path.rpartition('.')[0] or 'SECTION'}` shows it"
            )
        written += f"{part}[]." if inner is not hint else f"{part}."
        cls = inner
    return cls, written.removeprefix("--" if "[]" in written else "")


def section_paths(cls: type = Config, prefix: str = "", above: tuple[type, ...] = ()) -> list[str]:
    """Every section path below `cls`, entry types of lists included (`env.lexam.judges`), and
    below an env field each registered env's (`env.lexam`), but an env's own within itself (a
    mixture's members are any env but a mixture)."""
    paths = []
    above = (*above, cls)
    hints = typing.get_type_hints(cls)
    for item in fields(cls):
        hint = hints[item.name]
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        if inner is EnvConfig:
            path = f"{prefix}{item.name}"
            paths.append(path)
            for name, choice in discover_envs().items():
                if choice not in above:
                    paths += [f"{path}.{name}", *section_paths(choice, f"{path}.{name}.", above)]
        elif is_dataclass(inner):
            path = f"{prefix}{item.name}"
            paths += [path, *section_paths(inner, f"{path}.", above)]
    return paths


def _sections_hint(path: str) -> str:
    close = difflib.get_close_matches(path, section_paths(), n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else "`lexrl config show` lists them"


def list_sections() -> str:
    """`lexrl config show` alone: the sections with their purpose, and the nested ones."""
    lines = ["config sections (`lexrl config show SECTION` shows every key of one):"]
    lines += [f"  {name:10s} {purpose}" for name, purpose in SECTIONS.items()]
    nested = [path for path in section_paths() if "." in path]
    lines.append("nested sections:")
    lines += textwrap.wrap(
        ", ".join(nested),
        WIDTH,
        initial_indent="  ",
        subsequent_indent="  ",
        break_on_hyphens=False,
    )
    return "\n".join(lines)


def show_section(path: str) -> str:
    """Every key of one section: `--path.key` with its type and default, then its docstring."""
    cls, written = _resolve(path)
    if cls is EnvConfig:
        return _show_envs(path, written)
    purpose = SECTIONS.get(path) or first_sentence(
        field_docstrings(_parent_class(path)).get(path.rpartition(".")[2], "") or describe(cls),
        WIDTH,
    )
    lines = [f"{path}: {purpose}".rstrip(": ")]
    hints, docs = typing.get_type_hints(cls), field_docstrings(cls)
    for item in fields(cls):
        hint = hints[item.name]
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        lines.append("")
        if is_dataclass(hint):
            lines.append(f"{written}{item.name}.*  section: `lexrl config show {path}.{item.name}`")
        else:
            default = show_value(_default(item))
            lines.append(f"{written}{item.name}  {type_name(hint)} = {default}")
            if is_dataclass(inner):
                lines.append(f"    each entry: `lexrl config show {path}.{item.name}`")
        doc = docs.get(item.name, "")
        lines += [f"    {line}".rstrip() for line in doc.splitlines()]
    return "\n".join(lines)


def _show_envs(path: str, written: str) -> str:
    """An env section: its `type` and the registered envs whose options it may hold."""
    lines = [
        f"{path}: {SECTIONS.get(path, 'an env: `type` names it, the other keys are its options')}",
        "",
        f"{written}type  str",
        "    The registered env (`lexrl envs`); the section's other keys are its options:",
    ]
    for name, cls in discover_envs().items():
        lines.append(f"      {name:10s} {describe(cls)}  (`lexrl config show {path}.{name}`)")
    return "\n".join(lines)


def _parent_class(path: str) -> type:
    parent = path.rpartition(".")[0]
    return _section_class(parent) if parent else Config
