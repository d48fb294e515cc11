"""Deprecated: reading model replies moved to the side of the trust boundary that reads them.

* :func:`parse_asker_output`, :class:`AskerOutput`: :mod:`ambitab_gym.policies.llm_prompts`;
* :func:`parse_matcher_output`, :func:`matcher_rationale`, :func:`parse_responder_output`,
  :class:`MatcherAction`: :mod:`ambitab_gym.oracles.llm_prompts`;
* :func:`strip_thinking`, :func:`find_json_object`, :func:`extract_sql` (shared, non-privileged):
  :mod:`ambitab_gym.textutil`.

Every name still resolves here, with a ``DeprecationWarning``, for one release. No module of the
package imports this shim.
"""

from __future__ import annotations

from typing import Any

from ambitab_gym import textutil
from ambitab_gym.llm._moved import moved
from ambitab_gym.oracles import llm_prompts as oracle_prompts
from ambitab_gym.policies import llm_prompts as agent_prompts

_MOVED = {
    "AskerOutput": agent_prompts,
    "parse_asker_output": agent_prompts,
    "MatcherAction": oracle_prompts,
    "matcher_rationale": oracle_prompts,
    "parse_matcher_output": oracle_prompts,
    "parse_responder_output": oracle_prompts,
    "extract_sql": textutil,
    "find_json_object": textutil,
    "strip_thinking": textutil,
}

__all__ = sorted(_MOVED)


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
