"""Deprecated: the LLM prompts moved to the side of the trust boundary they serve.

* asker and solver prompts, :data:`ASKER_STRATEGIES`, :func:`is_refusal`:
  :mod:`ambitab_gym.policies.llm_prompts`;
* matcher and responder prompts, :class:`OracleNotes`, :class:`NoteEntry`:
  :mod:`ambitab_gym.oracles.llm_prompts`;
* :func:`response_format`: :mod:`ambitab_gym.llm.client`;
* :data:`ROLE_MARKERS` (all four roles): :mod:`ambitab_gym.testing.llm_server`.

Every name still resolves here, with a ``DeprecationWarning``, for one release. No module of the
package imports this shim.
"""

from __future__ import annotations

from typing import Any

from ambitab_gym.llm import client as _client
from ambitab_gym.llm._moved import moved
from ambitab_gym.oracles import llm_prompts as _ORACLE
from ambitab_gym.policies import llm_prompts as _AGENT
from ambitab_gym.testing import llm_server as _server

_MOVED = {
    "ASKER_STRATEGIES": _AGENT,
    "DIALECT_NAMES": _AGENT,
    "asker_messages": _AGENT,
    "asker_schema": _AGENT,
    "is_refusal": _AGENT,
    "solver_messages": _AGENT,
    "solver_schema": _AGENT,
    "NoteEntry": _ORACLE,
    "OracleNotes": _ORACLE,
    "matcher_messages": _ORACLE,
    "matcher_schema": _ORACLE,
    "responder_messages": _ORACLE,
    "responder_schema": _ORACLE,
    "response_format": _client,
    "ROLE_MARKERS": _server,
}

__all__ = sorted(_MOVED)


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
