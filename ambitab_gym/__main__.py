"""``python -m ambitab_gym`` runs the command line."""

from __future__ import annotations

from ambitab_gym.cli import entry

entry()
