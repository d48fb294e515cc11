"""Deprecated: the LLM oracle's access policy moved to :mod:`ambitab_gym.oracles.access`
(the privileged side of the trust boundary).

Every name still resolves here, with a ``DeprecationWarning``, for one release. No module of the
package imports this shim.
"""

from __future__ import annotations

from typing import Any

from ambitab_gym.llm._moved import moved
from ambitab_gym.oracles import access

_MOVED = dict.fromkeys(("AccessPolicy", "NotesBuilder", "resolve_term", "sql_segments"), access)

__all__ = sorted(_MOVED)


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
