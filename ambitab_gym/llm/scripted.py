"""Deprecated: the scripted server's core moved to :mod:`ambitab_gym.testing.llm_server_core`.

Every name still resolves here, with a ``DeprecationWarning``, for one release. No module of the
package imports this shim.
"""

from __future__ import annotations

from typing import Any

from ambitab_gym.llm._moved import moved
from ambitab_gym.testing import llm_server_core

_MOVED = dict.fromkeys(("FAULTS", "ScriptRule", "ScriptServer"), llm_server_core)

__all__ = sorted(_MOVED)


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
