"""Deprecated: the scripted OpenAI-compatible test server moved to
:mod:`ambitab_gym.testing.llm_server`.

Every name still resolves here, with a ``DeprecationWarning``, for one release, and
``python -m ambitab_gym.llm.testing`` still runs the server (``python -m
ambitab_gym.testing.llm_server`` is the new entry point). No module of the package imports this
shim.
"""

from __future__ import annotations

import warnings
from typing import Any

from ambitab_gym.llm._moved import moved
from ambitab_gym.testing import llm_server

_MOVED = dict.fromkeys(
    ("ASKER_TURN_PATTERN", "FAULTS", "ScriptRule", "ScriptedServer", "main", "role_rules"),
    llm_server,
)

__all__ = sorted(_MOVED)


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)


if __name__ == "__main__":
    warnings.warn(
        "python -m ambitab_gym.llm.testing moved to python -m ambitab_gym.testing.llm_server",
        DeprecationWarning,
        stacklevel=1,
    )
    raise SystemExit(llm_server.main())
