"""Metrics to Weights & Biases, the console and `metrics.jsonl`; never crashes a run.

Keys are namespaced (`reward/<component>`, `env/<metric>`, `agent/<role>/...`, `loss/...`,
`perf/...`). A mean over nothing (a step whose every episode failed has no reward) is left out
of the step's metrics, never written as 0: metrics.jsonl stays strict JSON, W&B shows a gap and
the console `n/a`. W&B runs offline unless WANDB_API_KEY is set (`logging.wandb_mode: auto`), or as the
environment's `WANDB_MODE` says when it is set; if
W&B cannot start or log, the run goes on with the local files and says so once.

Everything written, printed or handed to W&B passes through `lexrl.secrets` first: sample turns
carry model and judge text, and a judge behind a proxy that echoes headers may reply with the key.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console
from tqdm.auto import tqdm

from lexrl.config import Config, LoggingConfig
from lexrl.errors import ConfigError
from lexrl.jsonl import read_appended, step_record
from lexrl.secrets import scrub, scrub_tree, write_text

console = Console(stderr=True)

SHOWN = ("reward/total", "env/mas_recall", "loss/policy", "perf/step")
"""The metrics (prefixes) of a step's console line."""


WANDB_MODES = {"online": "online", "run": "online", "offline": "offline", "dryrun": "offline"}
WANDB_MODES["disabled"] = "disabled"
"""W&B's own values of `WANDB_MODE`, by the mode lexrl runs W&B in."""


def resolve_wandb_mode(config: LoggingConfig) -> str:
    """The W&B mode of a run: `disabled` under `WANDB_DISABLED=true`; the environment's
    `WANDB_MODE` when set (what the person launching the run asks for, as W&B and the Hugging
    Face trainers read it); else `logging.wandb_mode`, whose `auto` is online only when
    WANDB_API_KEY is set. ConfigError for a `WANDB_MODE` W&B does not know."""
    if os.environ.get("WANDB_DISABLED", "").strip().lower() in ("true", "1", "yes"):
        return "disabled"  # the Hugging Face trainers' switch
    variable = os.environ.get("WANDB_MODE", "").strip().lower()
    if variable:
        if variable not in WANDB_MODES:
            raise ConfigError(
                f"WANDB_MODE={variable}: not a W&B mode; give one of {', '.join(WANDB_MODES)}, "
                "or unset it to use logging.wandb_mode"
            )
        return WANDB_MODES[variable]
    if config.wandb_mode != "auto":
        return config.wandb_mode
    return "online" if os.environ.get("WANDB_API_KEY") else "offline"


class RunLogger:
    def __init__(self, config: Config, output_dir: str | Path, enabled: bool, resume: bool):
        self.enabled = enabled
        self.output_dir = Path(output_dir)
        self.metrics_path = self.output_dir / "metrics.jsonl"
        self.samples_path = self.output_dir / "samples.jsonl"
        self._wandb = None
        if not enabled:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        mode = resolve_wandb_mode(config.logging)
        if mode == "disabled":
            return
        try:
            import wandb

            run_id_file = self.output_dir / "wandb_run_id"
            run_id = (
                run_id_file.read_text().strip()
                if resume and run_id_file.is_file()
                else secrets.token_hex(4)
            )
            write_text(run_id_file, run_id)
            self._wandb = wandb.init(
                project=config.logging.wandb_project,
                dir=str(self.output_dir),
                mode=mode,
                id=run_id,
                resume="allow",
                config=scrub_tree(json.loads(json.dumps(_as_dict(config), default=str))),
            )
        except Exception as error:  # noqa: BLE001 - W&B trouble must not stop training
            warnings.warn(scrub(f"W&B disabled for this run: {error}"), stacklevel=2)
            self._wandb = None

    def truncate_after(self, step: int) -> None:
        """Drop the lines a crashed run wrote after its last checkpoint; they are redone. A last
        line the crash cut is dropped too (`lexrl.jsonl.read_appended`)."""
        for path in (self.metrics_path, self.samples_path):
            if self.enabled and path.is_file():
                records = read_appended(path, step_record)
                kept = [line for line, record in records if record["step"] <= step]
                write_text(path, "".join(line + "\n" for line in kept))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        write_text(self.metrics_path, json.dumps({"step": step, **metrics}) + "\n", append=True)
        # tqdm.write keeps the step bar below the lines instead of tearing it.
        tqdm.write(scrub(step_line(step, metrics)), file=sys.stderr)
        self._wandb_call("log", scrub_tree(metrics), step=step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """A table of sample turns per role (role, prompt tail, completion, reward)."""
        if not self.enabled or not rows:
            return
        rows = scrub_tree(rows)
        lines = (json.dumps({"step": step, **row}, ensure_ascii=False) + "\n" for row in rows)
        write_text(self.samples_path, "".join(lines), append=True)
        if self._wandb is not None:
            try:
                import wandb

                columns = list(rows[0])
                table = wandb.Table(
                    columns=columns, data=[[row[c] for c in columns] for row in rows]
                )
                self._wandb_call("log", {"samples": table}, step=step)
            except Exception as error:  # noqa: BLE001
                warnings.warn(scrub(f"W&B sample table not logged: {error}"), stacklevel=2)

    def _wandb_call(self, method: str, *args: Any, **kwargs: Any) -> None:
        if self._wandb is None:
            return
        try:
            getattr(self._wandb, method)(*args, **kwargs)
        except Exception as error:  # noqa: BLE001
            warnings.warn(scrub(f"W&B stopped logging: {error}"), stacklevel=2)
            self._wandb = None

    def finish(self) -> None:
        if self._wandb is not None:
            self._wandb_call("finish")


def failed_episodes(metrics: dict[str, float]) -> str | None:
    """`failed/episodes` of a step (`4/4`), or None when no episode failed."""
    if not metrics.get("judge/failed"):
        return None
    return f"{metrics['judge/failed']:.0f}/{metrics['count/episodes']:.0f}"


def step_line(step: int, metrics: dict[str, float]) -> str:
    """The console line of a step: its reward (`n/a` when no episode was scored), the other
    `SHOWN` metrics it has, and the failed episodes when there are any."""
    shown = {"reward/total": "n/a"}
    shown.update({k: f"{v:.4f}" for k, v in metrics.items() if k.startswith(SHOWN)})
    failed = failed_episodes(metrics)
    if failed is not None:
        shown["failed"] = failed
    return f"step {step}: " + "  ".join(f"{k}={v}" for k, v in shown.items())


def _as_dict(config: Config) -> dict:
    from dataclasses import asdict

    return asdict(config)
