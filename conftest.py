"""Test-session setup shared by the test suite and the doctests.

Every test session gets its own data home (``AMBITAB_HOME``), so built databases and corpora
from earlier runs or from the user's machine never leak into a test.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile

import pytest

# Doctests of optional integrations run only where their packages are installed.
collect_ignore = []
if importlib.util.find_spec("stable_baselines3") is None or importlib.util.find_spec("torch") is None:
    collect_ignore.append("ambitab_gym/integrations/sb3.py")

_SESSION_HOME = tempfile.mkdtemp(prefix="ambitab-test-home-")
os.environ["AMBITAB_HOME"] = _SESSION_HOME


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    """A fresh, empty data home for one test."""
    home = tmp_path / "ambitab-home"
    home.mkdir()
    monkeypatch.setenv("AMBITAB_HOME", str(home))
    return home
