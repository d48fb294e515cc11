"""pytest: skip the doctests of adapters whose trainer package is not installed."""

from __future__ import annotations

import importlib.util

collect_ignore = []
if (
    importlib.util.find_spec("stable_baselines3") is None
    or importlib.util.find_spec("torch") is None
):
    collect_ignore.append("sb3.py")
