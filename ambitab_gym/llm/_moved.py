"""Deprecated aliases of names that moved out of :mod:`ambitab_gym.llm` (kept for one release).

* :func:`moved` - resolve an old name to the object at its new location, with a
  ``DeprecationWarning`` naming that location.

The old-path modules (``ambitab_gym.llm.prompts``, ``.parsing``, ``.access``, ``.testing``,
``.scripted``) are thin shims: each imports its new locations and forwards attribute access
through :func:`moved`. No module of the package imports a shim, so the import graph stays
acyclic; this helper itself imports nothing of the package.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["moved"]


def moved(
    old_module: str, name: str, table: Mapping[str, ModuleType | str], *, stacklevel: int = 3
) -> Any:
    """The object an old ``old_module.name`` now is, after a ``DeprecationWarning``.

    Args:
        old_module: the old module path, e.g. ``ambitab_gym.llm.prompts``.
        name: the attribute asked for.
        table: old name -> the module it lives in now (or that module's path).
        stacklevel: the warning's stack level (the caller of the module ``__getattr__``).

    Raises:
        AttributeError: ``name`` is no moved name of ``old_module``.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     found = moved("old.path", "dumps", {"dumps": "json"})
    >>> found.__module__, caught[0].category.__name__
    ('json', 'DeprecationWarning')
    """
    found = table.get(name)
    if found is None:
        raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
    module = importlib.import_module(found) if isinstance(found, str) else found
    new_module = module.__name__
    warnings.warn(
        f"{old_module}.{name} moved to {new_module}.{name}; import it from there "
        f"(the old path is removed in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    return getattr(module, name)
