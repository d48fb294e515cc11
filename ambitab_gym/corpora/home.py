"""Where ambitab-gym keeps data: ``$AMBITAB_HOME``, else the platform's user-data folder.

* :func:`data_home` - the root (``platformdirs.user_data_path("ambitab-gym")`` by default).
* :func:`built_corpora_dir` - built corpora (``<home>/corpora/<name>``), which take precedence
  over the bundled samples.
* :func:`cache_dir` - databases built from bundled SQL scripts.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["ENV_VAR", "built_corpora_dir", "cache_dir", "data_home"]

ENV_VAR = "AMBITAB_HOME"


def data_home() -> Path:
    """The data home: ``$AMBITAB_HOME`` when set, else the platform's user data folder.

    >>> data_home().is_absolute() or "AMBITAB_HOME" in os.environ
    True
    """
    configured = os.environ.get(ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    return platformdirs.user_data_path("ambitab-gym", appauthor=False)


def built_corpora_dir() -> Path:
    """Folder of corpora built from upstream data (``ambitab-gym build``)."""
    return data_home() / "corpora"


def cache_dir() -> Path:
    """Folder of databases built from the bundled SQL scripts."""
    return data_home() / "cache"
