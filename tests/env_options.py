"""Env options checked the way a user's are: through `load_config`, where each env's `CHOICES`,
`BOUNDS` and `check` run (an env's constructor no longer checks them)."""

from __future__ import annotations

import json

from lexrl.config import Config, load_config


def overrides(env_type: str, **options: object) -> list[str]:
    """`--env.type env_type --env.KEY VALUE ...`; a value that is not a string as JSON (YAML)."""
    args = ["--env.type", env_type]
    for key, value in options.items():
        args += [f"--env.{key}", value if isinstance(value, str) else json.dumps(value)]
    return args


def load_env(env_type: str, **options: object) -> Config:
    """The config of `env_type` with `options`, validated as `lexrl train` would."""
    return load_config(None, overrides(env_type, **options))
