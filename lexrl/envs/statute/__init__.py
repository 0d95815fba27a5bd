"""LegalMALR statute retrieval env (see `env.py`)."""

from lexrl.envs.statute.env import ROLES, StatuteEnv

__all__ = ["ROLES", "StatuteEnv"]
